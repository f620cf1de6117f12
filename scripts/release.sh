#!/usr/bin/env bash
# Builds a sturdy release into dist/ (or $OUT):
#   sturdy_VERSION_OS_ARCH.tar.gz  for linux and darwin, amd64 and arm64
#   sturdy_PKGVERSION-1_ARCH.deb and sturdy-PKGVERSION-1.ARCH.rpm  for linux
#   sturdy-gateway_VERSION_linux_ARCH.tar.gz  Kubernetes mode's command, for
#                                  the linux platforms (its usual home is the
#                                  Dockerfile's sturdy-gateway image)
#   SHA256SUMS                     of all of them (sha256sum -c SHA256SUMS)
#
# Each binary is static (CGO_ENABLED=0), built with -trimpath, and stamped
# with the version from git describe; each sturdy tarball holds the binary,
# LICENSE, NOTICE, THIRD_PARTY_LICENSES, README.md, the default config, the
# systemd unit, the man page and shell completions; each sturdy-gateway
# tarball the binary, LICENSE, NOTICE, its own THIRD_PARTY_LICENSES (it
# links client-go), README.md and the manifests of deploy/kubernetes/gateway.
# The packages are built
# by nfpm from the tools module (packaging/nfpm.yaml), never a dependency
# of sturdy itself (go -C tools build github.com/goreleaser/nfpm/v2/cmd/nfpm).
#
# A release is built from a tagged, clean commit: its version is the tag.
# SNAPSHOT=1 builds one from anything else, versioned as git describe says
# (v0.1.0-3-gabcdef0, -dirty when the tree is), for tests and previews.
#
# Knobs (environment): SNAPSHOT, VERSION (snapshots only; default: git
# describe --tags --always --dirty), PLATFORMS (default: "linux/amd64
# linux/arm64 darwin/amd64 darwin/arm64"), PACKAGES (default: "deb rpm";
# empty for none), GATEWAY (default 1; 0 leaves out sturdy-gateway, whose
# client-go takes minutes to compile), OUT.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${SNAPSHOT:-}" != 1 ]; then
    tag=$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null) || {
        echo "release: HEAD ($(git rev-parse --short HEAD 2>/dev/null || echo unknown)) is not a tagged version; tag it (git tag -a v0.1.0) or build a snapshot with SNAPSHOT=1" >&2
        exit 1
    }
    if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
        echo "release: the tree has uncommitted changes; commit them, or build a snapshot with SNAPSHOT=1" >&2
        exit 1
    fi
    if [ -n "${VERSION:-}" ] && [ "$VERSION" != "$tag" ]; then
        echo "release: VERSION=$VERSION is not the tag $tag; a release's version is its tag (SNAPSHOT=1 for another)" >&2
        exit 1
    fi
    VERSION=$tag
fi
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
PLATFORMS=${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
PACKAGES=${PACKAGES-deb rpm}
OUT=${OUT:-dist}
# Tarball timestamps from the last commit, so that the same commit gives
# the same archives.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH

# dpkg wants a version that starts with a digit, rpm one without "-":
# v1.2.3 -> 1.2.3, v1.2.3-4-gabc-dirty -> 1.2.3+4.gabc.dirty, abc1234 -> 0.0.0+abc1234.
pkg_version() {
    local v=${1#v}
    [[ "$v" =~ ^[0-9]+\.[0-9]+ ]] || v="0.0.0+$v"
    case "$v" in
        *+*) ;;
        *-*) v="${v%%-*}+${v#*-}" ;;
    esac
    echo "${v//-/.}"
}
PKG_VERSION=$(pkg_version "$VERSION")
LDFLAGS="-s -w -X github.com/sturdyproxy/sturdy/internal/cli.version=$VERSION"

rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "release: sturdy $VERSION (packages: $PKG_VERSION) into $OUT"

# nfpm, built from the tools module (run from here, so that the paths in
# packaging/nfpm.yaml are relative to the repository).
if [ -n "$PACKAGES" ]; then
    go -C tools build -o "$work/nfpm" github.com/goreleaser/nfpm/v2/cmd/nfpm
fi

# Files made by sturdy itself (man page, completions): by a native build of
# the same source, since a cross-compiled binary may not run here.
share=$work/share
mkdir -p "$share/completions"
CGO_ENABLED=0 go build -trimpath -ldflags "$LDFLAGS" -o "$work/sturdy-native" ./cmd/sturdy
"$work/sturdy-native" man | gzip -9n > "$share/sturdy.1.gz"
"$work/sturdy-native" completion bash > "$share/completions/sturdy.bash"
"$work/sturdy-native" completion zsh > "$share/completions/_sturdy"
"$work/sturdy-native" completion fish > "$share/completions/sturdy.fish"

# The license and notice of every module linked into the binary of
# command $3 (sturdy or sturdy-gateway).
third_party() {
    echo "Licenses of the software the $3 binary includes."
    echo
    echo "================================================================"
    echo "Go standard library"
    echo "================================================================"
    cat "$(go env GOROOT)/LICENSE"
    GOOS=$1 GOARCH=$2 go list -deps -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}} {{.Dir}}{{end}}{{end}}' "./cmd/$3" |
        sort -u | while read -r path version dir; do
            echo
            echo "================================================================"
            echo "$path $version"
            echo "================================================================"
            for f in "$dir"/LICENSE* "$dir"/LICENCE* "$dir"/COPYING* "$dir"/NOTICE*; do
                if [ -f "$f" ]; then echo "--- $(basename "$f")"; cat "$f"; fi
            done
        done
}

for platform in $PLATFORMS; do
    os=${platform%/*}
    arch=${platform#*/}
    name=sturdy_${VERSION#v}_${os}_${arch}
    stage=$work/$name
    mkdir -p "$stage/systemd" "$stage/completions"
    echo "release: $platform"
    CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "$LDFLAGS" -o "$stage/sturdy" ./cmd/sturdy
    third_party "$os" "$arch" sturdy > "$stage/THIRD_PARTY_LICENSES"
    cp LICENSE NOTICE README.md "$stage/"
    cp contrib/sturdy.yaml "$stage/sturdy.yaml"
    cp contrib/systemd/sturdy.service "$stage/systemd/"
    cp "$share/sturdy.1.gz" "$stage/"
    cp "$share/completions/"* "$stage/completions/"
    tar -C "$work" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
        -cf - "$name" | gzip -9n > "$OUT/$name.tar.gz"
    if [ "$os" = linux ]; then
        for packager in $PACKAGES; do
            STAGE=$stage ARCH=$arch PKG_VERSION=$PKG_VERSION \
                "$work/nfpm" package --config packaging/nfpm.yaml --packager "$packager" --target "$OUT/"
        done
        # sturdy-gateway runs in a cluster: linux only, no package.
        [ "${GATEWAY:-1}" = 0 ] && continue
        gw=sturdy-gateway_${VERSION#v}_${os}_${arch}
        mkdir -p "$work/$gw/kubernetes"
        CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "$LDFLAGS" -o "$work/$gw/sturdy-gateway" ./cmd/sturdy-gateway
        third_party "$os" "$arch" sturdy-gateway > "$work/$gw/THIRD_PARTY_LICENSES"
        cp LICENSE NOTICE README.md "$work/$gw/"
        cp deploy/kubernetes/gateway/*.yaml "$work/$gw/kubernetes/"
        tar -C "$work" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
            -cf - "$gw" | gzip -9n > "$OUT/$gw.tar.gz"
    fi
done

(cd "$OUT" && sha256sum -- * > SHA256SUMS)
echo "release: done"
ls -l "$OUT"
