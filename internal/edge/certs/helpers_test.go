package certs

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// parse loads a config text after replacing {{name}} with vars[name].
func parse(t *testing.T, text string, vars map[string]string) *config.Config {
	t.Helper()
	for k, v := range vars {
		text = strings.ReplaceAll(text, "{{"+k+"}}", v)
	}
	c, err := config.Parse([]byte(text), "test.yaml")
	if err != nil {
		t.Fatalf("config: %v\n%s", err, text)
	}
	return c
}

func compile(t *testing.T, c *config.Config) map[string]*Listener {
	t.Helper()
	ls, err := Compile(c, nil, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// seen is what the test backend saw of a request: the identity headers as
// the proxy would pass them, and why the route's requirement refused it.
type seen struct {
	Subject, Fingerprint, Verified string
	Refused                        string
	Proto                          string
}

// serve starts an HTTPS server on loopback with h's TLS config, answering
// with what it saw (as JSON). Requests to /admin require a verified client
// certificate.
func serve(t *testing.T, h *Handle) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		TLSConfig:   h.TLSConfig(),
		ConnContext: ConnContext,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req := NoRequirement
			if r.URL.Path == "/admin" {
				req = RequireVerified
			}
			var s seen
			if err := req.Check(r); err != nil {
				s.Refused = err.Error()
			}
			out := r.Header.Clone()
			SetIdentity(out, r)
			s.Subject, s.Fingerprint, s.Verified = out.Get(HeaderSubject), out.Get(HeaderFingerprint), out.Get(HeaderVerified)
			s.Proto = r.Proto
			json.NewEncoder(w).Encode(s)
		}),
		ErrorLog: log.New(io.Discard, "", 0), // refused handshakes are the point of some tests
	}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// handshake dials addr with cfg and returns the connection state.
func handshake(t *testing.T, addr string, cfg *tls.Config) (tls.ConnectionState, error) {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer c.Close()
	return c.ConnectionState(), nil
}

// get sends one request over a fresh client using cfg.
func get(t *testing.T, addr, path string, cfg *tls.Config, header http.Header) (seen, error) {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "https://"+addr+path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	cl := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return seen{}, err
	}
	defer resp.Body.Close()
	var s seen
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &s); err != nil {
		return s, errors.New("bad answer: " + string(b))
	}
	return s, nil
}

func leafNames(cs tls.ConnectionState) []string {
	if len(cs.PeerCertificates) == 0 {
		return nil
	}
	return cs.PeerCertificates[0].DNSNames
}

// client is a TLS client config trusting roots and asking for name.
func client(roots *x509.CertPool, name string) *tls.Config {
	return &tls.Config{RootCAs: roots, ServerName: name}
}
