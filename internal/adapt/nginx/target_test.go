package nginx

import "testing"

// A variable right after the port that holds a path starts the URI: nginx
// evaluates the whole URL and reads the host before its first slash.
func TestDecodeTargetPathVariable(t *testing.T) {
	s := site(t, "http { upstream app { server 10.0.0.1:8080; } }")
	tests := []struct{ raw, host, uri string }{
		{"http://127.0.0.1:3000$uri", "127.0.0.1:3000", "$uri"},
		{"http://app$request_uri", "app", "$request_uri"},
		{"http://app${document_uri}?x=1", "app", "${document_uri}?x=1"},
		{"http://app/v1$uri", "app", "/v1$uri"},
		{"http://$backend$uri", "$backend$uri", ""}, // the host is a variable: left as it was
		{"http://app$urix", "app$urix", ""},         // another variable
	}
	for _, tt := range tests {
		tg := s.DecodeTarget(tt.raw)
		if tg.Host != tt.host || tg.URI != tt.uri || !tg.Variable {
			t.Errorf("%s: host %q uri %q variable %v; want %q %q", tt.raw, tg.Host, tg.URI, tg.Variable, tt.host, tt.uri)
		}
	}
}
