//go:build !linux

package h1

// wait is unsupported here (see Supported): the connection is handed off
// at once, so that net/http serves it.
func (c *conn) wait() event { return evData }

func (c *conn) peek(uintptr) bool { return true }
