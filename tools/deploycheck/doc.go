// Package deploycheck holds the tests of what sturdy ships for containers:
// the Dockerfile, read with BuildKit's own parser and linter, and the
// Kubernetes manifests, decoded strictly into the Kubernetes API types. It
// lives in the tools module so that those libraries stay out of sturdy's
// own module. Run it with: go -C tools test ./...
package deploycheck
