package httphead

import (
	"strconv"
	"strings"
	"testing"
)

var keepAliveCases = []struct {
	v    string
	want int
}{
	{"timeout=5", 5},
	{"timeout=5, max=100", 5},
	{"max=100,timeout=15", 15},
	{" Timeout = 3 ", 3},
	{`timeout="7"`, 7},
	{"timeout=0", 0},
	{"max=100", -1},
	{"", -1},
	{"timeout=", -1},
	{"timeout=-1", -1},
	{"timeout=5s", -1},
	{"timeout=9999999999", -1},
	{"timeouts=5", -1},
}

func TestKeepAliveTimeout(t *testing.T) {
	for _, c := range keepAliveCases {
		if got := KeepAliveTimeout([]byte(c.v)); got != c.want {
			t.Errorf("%q: %d, want %d", c.v, got, c.want)
		}
	}
}

// Whatever the value, the timeout is -1 or what a plain reading of its
// first timeout parameter gives.
func FuzzKeepAliveTimeout(f *testing.F) {
	for _, c := range keepAliveCases {
		f.Add(c.v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got := KeepAliveTimeout([]byte(v))
		want := -1
		for _, elem := range strings.Split(v, ",") {
			name, val, ok := strings.Cut(strings.Trim(elem, " \t"), "=")
			if !ok || !strings.EqualFold(strings.TrimRight(name, " \t"), "timeout") {
				continue
			}
			val = strings.Trim(strings.TrimLeft(val, " \t"), `"`)
			if n, err := strconv.Atoi(val); err == nil && n >= 0 && len(val) <= 9 && strings.Trim(val, "0123456789") == "" {
				want = n
			}
			break
		}
		if got != want {
			t.Errorf("%q: %d, want %d", v, got, want)
		}
	})
}
