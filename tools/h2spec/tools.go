//go:build tools

// Package h2spec pins h2spec, the HTTP/2 conformance tester that sturdy's
// protocol tests build and run against its h2c and TLS listeners. It is a
// module of its own so that its dependencies stay out of sturdy's and of
// the release tools'.
package h2spec

import _ "github.com/summerwind/h2spec/cmd/h2spec"
