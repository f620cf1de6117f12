// Package grpcwire reads and writes grpc-timeout, the header field in which
// a gRPC call carries its deadline (gRPC over HTTP/2: at most 8 digits and
// a unit). The proxy passes callers' deadlines on with it and the active
// checker bounds its probes with it, so both write the same value.
package grpcwire

import (
	"strconv"
	"time"
)

// maxDigits is the most digits a grpc-timeout value may have.
const maxDigits = 8

// ParseTimeout reads a grpc-timeout value; ok is false when it is not one.
func ParseTimeout(v string) (d time.Duration, ok bool) {
	if len(v) < 2 || len(v) > maxDigits+1 {
		return 0, false
	}
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	return time.Duration(n) * unit, true
}

// FormatTimeout writes d as a grpc-timeout value, in the finest unit that
// fits in 8 digits, rounded up so that the callee never sees a shorter
// deadline than the caller's. A deadline already past is one nanosecond.
func FormatTimeout(d time.Duration) string {
	if d <= 0 {
		return "1n"
	}
	for _, u := range []struct {
		unit time.Duration
		c    string
	}{{time.Nanosecond, "n"}, {time.Microsecond, "u"}, {time.Millisecond, "m"}, {time.Second, "S"}, {time.Minute, "M"}} {
		if n := (d + u.unit - 1) / u.unit; n < 1e8 {
			return strconv.FormatInt(int64(n), 10) + u.c
		}
	}
	return strconv.FormatInt(int64((d+time.Hour-1)/time.Hour), 10) + "H"
}
