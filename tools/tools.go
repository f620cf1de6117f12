//go:build tools

// Package tools pins the build-time tools of sturdy's releases, so that
// they stay out of the main module: nfpm builds the .deb and .rpm.
package tools

import _ "github.com/goreleaser/nfpm/v2/cmd/nfpm"
