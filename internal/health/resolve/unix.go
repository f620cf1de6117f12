package resolve

import (
	"encoding/base32"
	"strings"
)

// Pool hosts may be unix sockets ("unix:/run/app.sock"). A socket path
// cannot stand in a URL's host, where the upstream clients key their
// connections, so each socket gets a dial target of its own: a host name
// that encodes the path and that DialContext turns back into it.

const (
	unixPrefix   = "unix:"
	targetPrefix = "unix-"
	targetSuffix = ".sturdy.invalid:1"
)

var unixEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// IsUnix reports whether a pool host address names a unix socket.
func IsUnix(addr string) bool { return strings.HasPrefix(addr, unixPrefix) }

// Target is what requests to the pool host at addr are sent to: addr
// itself, or for a unix socket a host:port that DialContext maps back to
// the socket.
func Target(addr string) string {
	if !IsUnix(addr) {
		return addr
	}
	return targetPrefix + strings.ToLower(unixEncoding.EncodeToString([]byte(addr[len(unixPrefix):]))) + targetSuffix
}

// unixPath returns the socket path a Target stands for.
func unixPath(target string) (string, bool) {
	s, ok := strings.CutPrefix(target, targetPrefix)
	if !ok {
		return "", false
	}
	if s, ok = strings.CutSuffix(s, targetSuffix); !ok {
		return "", false
	}
	b, err := unixEncoding.DecodeString(strings.ToUpper(s))
	if err != nil {
		return "", false
	}
	return string(b), true
}
