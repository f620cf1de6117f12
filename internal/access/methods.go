package access

// A MethodSet restricts the methods a route accepts (nginx's
// limit_except): a compiled bitset, so the check is a table lookup and a
// mask, and a refusal is 405 with the Allow header. As in nginx, allowing
// GET allows HEAD too.

import (
	"fmt"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// MethodSet is a compiled set of allowed methods. It is immutable.
type MethodSet struct {
	bits  uint32
	allow string // the Allow header of a 405
}

// methodBit numbers the methods config.LimitExceptMethods lists; other methods
// (custom ones, CONNECT, TRACE) have no bit and are refused by any Set.
func methodBit(m string) uint32 {
	for i, k := range config.LimitExceptMethods {
		if m == k {
			return 1 << i
		}
	}
	return 0
}

// CompileMethods builds the set; nil for no methods (no restriction). path names
// the key in errors ("routes[2].methods").
func CompileMethods(path string, ms []string) (*MethodSet, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	s := &MethodSet{}
	for i, m := range ms {
		b := methodBit(strings.ToUpper(m))
		if b == 0 {
			return nil, fmt.Errorf("%s[%d]: unknown method %q", path, i, m)
		}
		s.bits |= b
	}
	if s.bits&methodBit("GET") != 0 {
		s.bits |= methodBit("HEAD")
	}
	var names []string
	for _, k := range config.LimitExceptMethods {
		if s.bits&methodBit(k) != 0 {
			names = append(names, k)
		}
	}
	s.allow = strings.Join(names, ", ")
	return s, nil
}

// Allows reports whether method may use the route. Method names are
// case-sensitive (RFC 9110), so "get" is not GET.
func (s *MethodSet) Allows(method string) bool {
	var b uint32
	switch method { // the common methods without a loop
	case "GET":
		b = 1 << 0
	case "HEAD":
		b = 1 << 1
	case "POST":
		b = 1 << 2
	default:
		b = methodBit(method)
	}
	return s.bits&b != 0
}

// Allow is the value of the Allow header for a 405.
func (s *MethodSet) Allow() string { return s.allow }
