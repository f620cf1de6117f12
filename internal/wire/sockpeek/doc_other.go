//go:build !linux

// Package sockpeek looks at a socket without reading from it; it is
// implemented on Linux only.
package sockpeek
