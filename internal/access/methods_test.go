package access

import (
	"testing"

	"github.com/sturdyproxy/sturdy/internal/config"
)

func TestCommonMethodBitsMatchTheList(t *testing.T) {
	for i, m := range []string{"GET", "HEAD", "POST"} {
		if config.LimitExceptMethods[i] != m {
			t.Fatalf("Allows assumes %s is bit %d", m, i)
		}
	}
}

func TestAllowedMethods(t *testing.T) {
	s, err := CompileMethods("routes[0].methods", []string{"get", "POST"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		m    string
		want bool
	}{{"GET", true}, {"HEAD", true}, {"POST", true}, {"PUT", false}, {"DELETE", false}, {"get", false}, {"BREW", false}, {"CONNECT", false}} {
		if got := s.Allows(tc.m); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.m, got, tc.want)
		}
	}
	if s.Allow() != "GET, HEAD, POST" {
		t.Errorf("Allow %q", s.Allow())
	}
	head, _ := CompileMethods("p", []string{"HEAD"})
	if head.Allows("GET") || head.Allow() != "HEAD" {
		t.Error("HEAD does not imply GET")
	}
	if s, err := CompileMethods("p", nil); s != nil || err != nil {
		t.Error("no methods: no set")
	}
	if _, err := CompileMethods("routes[1].methods", []string{"GET", "BREW"}); err == nil || err.Error() != `routes[1].methods[1]: unknown method "BREW"` {
		t.Errorf("error %v", err)
	}
}

func BenchmarkAllows(b *testing.B) {
	s, _ := CompileMethods("p", []string{"GET", "POST", "DELETE"})
	for b.Loop() {
		s.Allows("DELETE")
	}
}
