package translate

import (
	"strings"
	"testing"
)

// A server whose own return answers every request before any location
// becomes one route with that fixed answer.
func TestServerFixedReturn(t *testing.T) {
	const up = "upstream app { server 10.0.0.1:8080; }\n"
	const site = "server {\nlisten 80;\nserver_name shop.example;\nlocation / { proxy_pass http://app; }\n}\n"
	tests := []struct {
		name, http string
		status     Status
		yaml       []string
		reason     string
	}{
		{
			name:   "a catch-all default server closing connections",
			http:   up + "server {\nlisten 80 default_server;\nserver_name _;\nreturn 444;\n}\n" + site,
			status: Translated,
			yaml:   []string{"respond: {close: true} # nginx's return 444: the connection closed without an answer"},
		},
		{
			name:   "a fixed text, whose locations nginx never reached",
			http:   up + "server {\nlisten 80 default_server;\nserver_tokens off;\nreturn 200 \"closed for maintenance\";\nlocation /x/ { proxy_pass http://app; }\n}\n" + site,
			status: Translated,
			yaml:   []string{"respond: {status: 200, body: closed for maintenance, content_type: text/plain}"},
		},
		{
			name:   "an if before the return keeps it listed",
			http:   up + "server {\nlisten 80 default_server;\nif ($http_x_probe) { return 204; }\nreturn 404;\n}\n" + site,
			status: NotTranslated,
			reason: "answers every request itself",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := importCase(t, tt.http)
			b := block(t, res, 3)
			if b.Status != tt.status {
				t.Errorf("status %q, want %q: %s", b.Status, tt.status, b.String())
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
