package harness

import (
	"testing"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
)

// sampleTests are regex locations and the path the harness sends for
// them: one nginx would also hand to that location.
var sampleTests = []struct {
	re   string
	fold bool
	want string
}{
	{`^/assets/`, false, "/assets/"},
	{`\.php$`, false, "/.php"},
	{`\.(PNG|gif)$`, true, "/.png"},
	// nginx reads "/." as "/": the sample must not end in a dot segment.
	{`/\.`, false, "/.x"},
	{`^/(?:\.|occ|console)`, false, "/.x"},
	{`^/\.\.$`, false, ""},
	{`^/(a|b)/\.$`, false, ""},
}

func TestSampleRegex(t *testing.T) {
	for _, tt := range sampleTests {
		if got := sampleRegex(tt.re, tt.fold); got != tt.want {
			t.Errorf("sampleRegex(%q, %v) = %q, want %q", tt.re, tt.fold, got, tt.want)
		}
	}
}

// Two servers of one upstream are the same backend for the comparison;
// servers of different upstreams, or a direct target, are not.
func TestSamePool(t *testing.T) {
	src := "events {}\nhttp {\nupstream a { server 10.0.0.1:80; server 10.0.0.2:80; }\nupstream b { server 10.0.0.3:80; server 10.0.0.2:80; }\nserver { listen 80; location / { proxy_pass http://a; } }\n}\n"
	cfg, err := nginx.Parse("m.conf", []byte(src), nginx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := upstreamPools(nginx.NewSite(cfg))
	tests := []struct {
		x, y string
		want bool
	}{
		{"10.0.0.1:80", "10.0.0.2:80", true},
		{"10.0.0.3:80", "10.0.0.2:80", true},
		{"10.0.0.1:80", "10.0.0.3:80", false},
		{"10.0.0.1:80", "127.0.0.1:9000", false},
		{"127.0.0.1:9000", "127.0.0.1:9000", true},
	}
	for _, tt := range tests {
		if got := p.samePool(tt.x, tt.y); got != tt.want {
			t.Errorf("samePool(%s, %s) = %v, want %v", tt.x, tt.y, got, tt.want)
		}
	}
}

// A redirect with the scheme's own port is the URL without it; any other
// port, or the other scheme's, is kept.
func TestDefaultPort(t *testing.T) {
	for in, want := range map[string]string{
		"https://a.test:443/x?q=1": "https://a.test/x?q=1",
		"https://a.test:443":       "https://a.test",
		"http://a.test:80?q":       "http://a.test?q",
		"https://a.test:80/x":      "https://a.test:80/x",
		"http://a.test:8080/":      "http://a.test:8080/",
		"/relative:443":            "/relative:443",
	} {
		if got := defaultPort(in); got != want {
			t.Errorf("defaultPort(%q) = %q, want %q", in, got, want)
		}
	}
}
