//go:build !linux

package h1

// wait does not wait here: the configuration refuses frontend: native off
// Linux, and this only lets the package build; a wait that returns at
// once leaves the server goroutine's read to block instead.
func (c *conn) wait() event { return evData }

func (c *conn) peek(uintptr) bool { return true }
