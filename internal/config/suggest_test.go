package config

import (
	"strings"
	"testing"
)

func TestDidYouMean(t *testing.T) {
	keys := []string{"client_body", "client_send", "connect", "response_header", "total"}
	for _, c := range []struct{ in, want string }{
		{"conect", "connect"},
		{"conncet", "connect"}, // a transposition is one edit
		{"Connect", "connect"},
		{"respnse_header", "response_header"},
		{"tota", "total"},
		{"totl", "total"},
		{"to", ""},      // too far from anything
		{"timeout", ""}, // a different word, not a misspelling
		{"connect", ""}, // known: nothing to suggest
	} {
		got := didYouMean(c.in, keys)
		want := ""
		if c.want != "" {
			want = `did you mean "` + c.want + `"? `
		}
		if got != want {
			t.Errorf("didYouMean(%q) = %q, want %q", c.in, got, want)
		}
	}
}

// Unknown keys and names that are misspellings say what was meant.
func TestErrorsSuggestTheNearestName(t *testing.T) {
	_, err := Parse([]byte(`
listeners: [ { name: web, listen: "127.0.0.1:8080" } ]
routes:
  - { name: site, default: true, pool: wbe, listeners: [ webb ], timeouts: { conect: 1s } }
pools: [ { name: web, hosts: [ { addr: "127.0.0.1:9001" } ] } ]
`), "s.yaml")
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		`routes[0].timeouts.conect: unknown key; did you mean "connect"? expected one of: client_body,`,
		`routes[0].pool: no pool named "wbe"; did you mean "web"? define it under pools`,
		`routes[0].listeners[0]: no listener named "webb"; did you mean "web"? name one from listeners`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%v", want, err)
		}
	}
}
