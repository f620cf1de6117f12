package h1

import (
	"net/url"
	"reflect"
	"testing"
)

// TestPlainTarget checks that the allocation-free parse of a target gives
// exactly what url.ParseRequestURI gives, and declines what it cannot.
func TestPlainTarget(t *testing.T) {
	for _, target := range []string{
		"/", "/x", "/a/b/c.html", "/bench?q=1", "/p?a=1&b=%zz", "/p?a=b?c", "/~u/-_.$&+,:;=@",
		"/p?", "//host/p", "*", "http://h/p", "/a%20b", "/a b", "/a#f", "/p?q=#f", "/ü", "/a!b",
		"/a\x00b", "/p?a\x7f", "", "/p?q=1;2", "/(x)", "/p?%41",
	} {
		var u url.URL
		ok := plainTarget(target, &u)
		want, err := url.ParseRequestURI(target)
		if !ok {
			continue // parsed in full by the caller
		}
		if err != nil {
			t.Errorf("%q: plainTarget accepted what ParseRequestURI refuses: %v", target, err)
			continue
		}
		if !reflect.DeepEqual(&u, want) {
			t.Errorf("%q: plainTarget %#v, ParseRequestURI %#v", target, u, *want)
		}
	}
	for _, target := range []string{"/", "/x", "/bench?q=1", "/p?a=b?c", "/p?a=1&b=%zz"} {
		if !plainTarget(target, new(url.URL)) {
			t.Errorf("%q: not taken by the fast path", target)
		}
	}
}
