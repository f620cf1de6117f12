package doctor

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A TLS default server that only rejects handshakes for unknown names
// needs no certificate; the same server without ssl_reject_handshake does.
func TestRejectHandshakeNeedsNoCertificate(t *testing.T) {
	const site = `
server {
    listen 443 ssl;
    server_name app.example.test;
    ssl_certificate a.pem;
    ssl_certificate_key a.key;
    location / { proxy_pass http://127.0.0.1:8080; }
}
`
	tests := []struct {
		name     string
		deflt    string
		wantFind bool
	}{
		{"rejects handshakes", "server {\n listen 443 ssl default_server;\n server_name _;\n ssl_reject_handshake on;\n}\n", false},
		{"no certificate at all", "server {\n listen 443 ssl default_server;\n server_name _;\n return 444;\n}\n", true},
		{"reject switched off", "server {\n listen 443 ssl default_server;\n server_name _;\n ssl_reject_handshake off;\n}\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "nginx.conf")
			if err := os.WriteFile(file, []byte("events {}\nhttp {\n"+tt.deflt+site+"}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			rep, err := Run(context.Background(), Input{Config: file})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, f := range rep.Findings {
				found = found || f.ID == "ssl-no-certificate"
			}
			if found != tt.wantFind {
				t.Errorf("ssl-no-certificate reported: %v, want %v", found, tt.wantFind)
			}
		})
	}
}
