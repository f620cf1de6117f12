# syntax=docker/dockerfile:1
# sturdy in a container: the static binary on an empty base image, run as a
# non-root user, healthy while the process answers HTTP (/livez).
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t sturdy .
#   docker run -p 8080:8080 -v $PWD/sturdy.yaml:/etc/sturdy/sturdy.yaml:ro sturdy

# GO_VERSION is the Go toolchain that builds the binary; go.mod asks for it.
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# VERSION is stamped into the binary (sturdy --version).
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/sturdyproxy/sturdy/internal/cli.version=${VERSION}" -o /out/sturdy ./cmd/sturdy
# The binary must pass its own check on the config the image ships.
RUN /out/sturdy check -q -c contrib/docker/sturdy.yaml

FROM scratch
# CA certificates for HTTPS upstreams; everything else is in the binary.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/sturdy /usr/bin/sturdy
COPY contrib/docker/sturdy.yaml /etc/sturdy/sturdy.yaml
COPY LICENSE NOTICE /usr/share/doc/sturdy/
# A numeric user: scratch has no /etc/passwd. 65532 is the "nonroot" user
# of distroless images, so volumes prepared for those fit.
USER 65532:65532
EXPOSE 8080 9901
STOPSIGNAL SIGTERM
# Liveness, not readiness: /readyz turns 503 when the backends are down or
# during a drain, and an orchestrator that replaces unhealthy containers
# would then restart the proxy, which fixes nothing and drops the degraded
# answers (sorry pages, stale copies) it was giving. Route traffic on
# /readyz; restart on /livez.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/usr/bin/sturdy", "healthcheck", "-q", "-url", "http://127.0.0.1:9901/livez"]
ENTRYPOINT ["/usr/bin/sturdy"]
CMD ["run", "-c", "/etc/sturdy/sturdy.yaml"]
