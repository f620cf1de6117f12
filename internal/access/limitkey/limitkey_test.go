package limitkey

import (
	"net/http"
	"testing"
)

func TestKeysOfARequest(t *testing.T) {
	r, _ := http.NewRequest("GET", "http://x/", nil)
	r.Header.Set("X-Api-Key", "k1")
	r.Header.Add("Cookie", "a=1; session=\"s-42\"; b=2")
	r.Header.Add("Cookie", "other=3")
	for _, tc := range []struct {
		key, want string
		ok        bool
	}{
		{"client_ip", "127.0.0.9", true},
		{"route", "api", true},
		{"header:x-api-key", "k1", true},
		{"header:X-Missing", "", false},
		{"cookie:session", "s-42", true},
		{"cookie:other", "3", true},
		{"cookie:sess", "", false},
	} {
		k, err := Parse(tc.key)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := k.Of(r, "127.0.0.9", "api")
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: got %q %v, want %q %v", tc.key, got, ok, tc.want, tc.ok)
		}
	}
	if k, _ := Parse("client_ip"); func() bool { _, ok := k.Of(r, "", "api"); return ok }() {
		t.Error("an unknown client address must give no key")
	}
}

func TestCookieLookupDoesNotAllocate(t *testing.T) {
	h := http.Header{"Cookie": {"a=1; b=2; session=abc"}}
	if n := testing.AllocsPerRun(100, func() { Cookie(h, "session") }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
