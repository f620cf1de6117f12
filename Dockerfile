# syntax=docker/dockerfile:1
# sturdy in a container: the static binary on an empty base image, run as a
# non-root user, healthy while the process answers HTTP (/livez). Two images from one file:
# sturdy (the default target) and sturdy-gateway, the Gateway API and
# Ingress controller (Kubernetes mode, docs/kubernetes.md), each built in
# its own stage, so that the sturdy image never compiles client-go.
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t sturdy .
#   docker run -p 8080:8080 -v $PWD/sturdy.yaml:/etc/sturdy/sturdy.yaml:ro sturdy
#   docker build --target sturdy-gateway --build-arg VERSION=$(git describe --tags --always --dirty) -t sturdy-gateway .

# GO_VERSION is the Go toolchain that builds the binaries; go.mod asks for it.
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS source
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .

FROM source AS build
# VERSION is stamped into the binary (sturdy --version).
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/sturdyproxy/sturdy/internal/cli.version=${VERSION}" -o /out/sturdy ./cmd/sturdy
# The binary must pass its own check on the config the image ships.
RUN /out/sturdy check -q -c contrib/docker/sturdy.yaml

FROM source AS build-gateway
# VERSION is stamped into the binary (sturdy-gateway --version).
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/sturdyproxy/sturdy/internal/cli.version=${VERSION}" -o /out/sturdy-gateway ./cmd/sturdy-gateway
RUN /out/sturdy-gateway check -q -c contrib/docker/sturdy-gateway.yaml

FROM scratch AS sturdy-gateway
COPY --from=build-gateway /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build-gateway /out/sturdy-gateway /usr/bin/sturdy-gateway
COPY contrib/docker/sturdy-gateway.yaml /etc/sturdy/sturdy.yaml
COPY LICENSE NOTICE /usr/share/doc/sturdy/
USER 65532:65532
# Gateway ports 80 and 443 are served on 8080 and 8443: no NET_BIND_SERVICE.
EXPOSE 8080 8443 9901
STOPSIGNAL SIGTERM
# Liveness, as the sturdy image below (which says why).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/usr/bin/sturdy-gateway", "healthcheck", "-q", "-url", "http://127.0.0.1:9901/livez"]
ENTRYPOINT ["/usr/bin/sturdy-gateway"]
CMD ["run", "-c", "/etc/sturdy/sturdy.yaml"]

# sturdy is the last stage: what a plain "docker build ." makes.
FROM scratch AS sturdy
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
