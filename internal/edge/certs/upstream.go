package certs

import (
	"crypto/tls"
	"fmt"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// UpstreamConfig builds the TLS client config towards a pool's backends
// from pools[].tls: the CA bundle that signs their certificates (the
// system's roots when none), the name checked, and the client certificate
// sturdy shows them. path is the key of t (pools[2].tls) for messages.
// Call it once per compile; the result is shared by every connection.
// Files are read through read (os.ReadFile, or the compile's own reads).
func UpstreamConfig(t *config.UpstreamTLS, path string, read func(string) ([]byte, error)) (*tls.Config, error) {
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify,
	}
	if t.CA != "" {
		pool, err := ReadPool(read, t.CA)
		if err != nil {
			return nil, fmt.Errorf("%s.ca: %v", path, err)
		}
		cfg.RootCAs = pool
	}
	if t.Cert != "" || t.Key != "" {
		pair, err := loadPair(read, t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("%s.cert: cannot load client certificate %s with key %s: %v", path, t.Cert, t.Key, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// loadPair is tls.LoadX509KeyPair reading through read.
func loadPair(read func(string) ([]byte, error), cert, key string) (tls.Certificate, error) {
	c, err := read(cert)
	if err != nil {
		return tls.Certificate{}, err
	}
	k, err := read(key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(c, k)
}
