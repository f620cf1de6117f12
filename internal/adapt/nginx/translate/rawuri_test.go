package translate

import (
	"slices"
	"strings"
	"testing"
)

// The "path as the client sent it" idiom, and proxy_pass http://host$uri
// after a rewrite, in configurations of our own.
func TestRawURIAndUriTarget(t *testing.T) {
	const up = "upstream app { server 10.0.0.1:8080; }\n"
	tests := []struct {
		name, http string
		status     Status
		yaml       []string
		reason     string
		needs      []Need
	}{
		{
			name:   "rewrite ^ $request_uri then a prefix strip is a prefix rewrite, which keeps the client's encoding and query",
			http:   up + "server {\nlisten 80;\nlocation /forge/ {\nrewrite ^ $request_uri;\nrewrite ^/forge(/.*) $1 break;\nproxy_pass http://10.0.0.2:3000$uri;\n}\n}",
			status: Translated,
			yaml:   []string{"path: {starts_with: /forge/}", "rewrite: {prefix: /}", "pool: 10.0.0.2-3000"},
		},
		{
			name:   "the same with a replacement before the capture",
			http:   up + "server {\nlisten 80;\nlocation /tools/forge/ {\nrewrite ^ $request_uri;\nrewrite ^/tools/forge/(.*)$ /git/$1 break;\nproxy_pass http://app$uri;\n}\n}",
			status: Translated,
			yaml:   []string{"path: {starts_with: /tools/forge/}", "rewrite: {prefix: /git/}", "pool: app"},
		},
		{
			name:   "proxy_pass http://host$uri after rewrite ... break sends the rewritten path, without the query",
			http:   up + "server {\nlisten 80;\nlocation /old/ {\nrewrite ^/old/(.*)$ /new/$1 break;\nproxy_pass http://app$uri;\n}\n}",
			status: TranslatedDiffers, needs: []Need{NeedRewrites},
			yaml:   []string{"rewrite: {regex: ^/old/(.*)$, path: '/new/${1}'}", "pool: app"},
			reason: "without the client's query",
		},
		{
			name:   "a capture that is not the rest of the path stays listed",
			http:   up + "server {\nlisten 80;\nlocation /forge/ {\nrewrite ^ $request_uri;\nrewrite ^/forge/([a-z]+)/x $1 break;\nproxy_pass http://app$uri;\n}\n}",
			status: NotTranslated, needs: []Need{NeedRewrites},
			reason: "2 rewrites in turn",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := importCase(t, tt.http)
			b := block(t, res, 5)
			if b.Status != tt.status {
				t.Errorf("status %q, want %q: %s", b.Status, tt.status, b.String())
			}
			for _, n := range tt.needs {
				if !slices.Contains(b.Needs, n) {
					t.Errorf("needs %v, want %q among them", b.Needs, n)
				}
			}
			if tt.reason != "" && !strings.Contains(strings.Join(b.Reasons, "\n"), tt.reason) {
				t.Errorf("reasons lack %q:\n%s", tt.reason, strings.Join(b.Reasons, "\n"))
			}
			for _, y := range tt.yaml {
				if !hasRoute(res, y) {
					t.Errorf("the YAML lacks %q:\n%s", y, res.YAML)
				}
			}
		})
	}
}
