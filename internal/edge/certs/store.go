// Package certs is the server side of a TLS listener: the certificates it
// holds, chosen per handshake by the name the client asks for (SNI), the
// protocol settings, client certificates (mTLS) and the identity passed to
// backends, and the TLS client config towards upstream pools. Everything is
// read and parsed once, when the config is compiled; a reload builds a new
// immutable Listener and swaps it in (Handle), so that the socket stays open
// and connections in flight keep the certificate they were given.
package certs

import (
	"crypto/tls"
	"crypto/x509"
	"strings"
	"time"
)

// Cert is one certificate of a listener.
type Cert struct {
	// Names are the names the certificate is chosen for: its DNS SANs, or
	// the config's explicit names.
	Names []string
	// NotBefore and NotAfter bound the leaf's validity.
	NotBefore, NotAfter time.Time
	// File is the certificate file; Path its config key
	// (listeners[1].tls.certificates[0]).
	File, Path string
	// Default marks the certificate for clients without SNI or with an
	// unknown name.
	Default bool

	leaf   *x509.Certificate
	chain  *tls.Certificate // until compiled into config
	config *tls.Config      // the listener's settings with this certificate alone
}

// Source supplies certificates that no file holds: the ACME manager.
type Source interface {
	// Manages reports whether the source supplies the certificate for name
	// (lower case, no trailing dot).
	Manages(name string) bool
	// GetCertificate answers handshakes for managed names and ACME
	// TLS-ALPN-01 challenges (ALPN acme-tls/1).
	GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error)
}

// Store finds a listener's certificate for a server name. It never changes
// once built; a reload builds a new one.
type Store struct {
	certs  []*Cert
	exact  map[string]*Cert
	wild   map[string]*Cert // "example.com" holds the certificate for *.example.com
	def    *Cert
	refuse bool
	source Source
}

func newStore(certs []*Cert, refuse bool, src Source) *Store {
	s := &Store{certs: certs, exact: map[string]*Cert{}, wild: map[string]*Cert{}, refuse: refuse, source: src}
	for _, c := range certs {
		for _, n := range c.Names {
			// The first certificate listed wins a name two of them cover.
			if rest, ok := strings.CutPrefix(n, "*."); ok {
				if s.wild[rest] == nil {
					s.wild[rest] = c
				}
			} else if s.exact[n] == nil {
				s.exact[n] = c
			}
		}
		if c.Default {
			s.def = c
		}
	}
	return s
}

// Certificates returns the store's certificates in config order.
func (s *Store) Certificates() []*Cert { return s.certs }

// Default returns the certificate for clients without SNI or with an
// unknown name, or nil when there is none (ACME only).
func (s *Store) Default() *Cert { return s.def }

// Lookup returns the file certificate chosen for a server name (as sent
// in SNI; "" when none was), or nil when the name is unknown and
// unknown_sni is refuse, or the name is the source's.
func (s *Store) Lookup(serverName string) *Cert {
	name := normalize(serverName)
	if c := s.match(name); c != nil {
		return c
	}
	if s.source != nil && name != "" && s.source.Manages(name) {
		return nil
	}
	if s.refuse {
		return nil
	}
	return s.def
}

// Covers reports whether a file certificate of the store serves name
// (exact or by a wildcard), as opposed to the default answering it.
func (s *Store) Covers(name string) bool { return s.match(normalize(name)) != nil }

func (s *Store) match(name string) *Cert {
	if name == "" {
		return nil
	}
	if c := s.exact[name]; c != nil {
		return c
	}
	// A certificate's wildcard stands for exactly one label (RFC 6125):
	// *.example.com covers a.example.com, not a.b.example.com.
	if _, rest, ok := strings.Cut(name, "."); ok {
		return s.wild[rest]
	}
	return nil
}

// normalize lower-cases a server name and drops a trailing dot. It
// allocates only for names that are not already lower case.
func normalize(name string) string {
	name = strings.TrimSuffix(name, ".")
	for i := 0; i < len(name); i++ {
		if c := name[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(name)
		}
	}
	return name
}

// covers reports whether the certificate pattern p (exact or *.wildcard)
// serves host, which may itself be a route's wildcard.
func covers(p, host string) bool {
	if p == host {
		return true
	}
	rest, ok := strings.CutPrefix(p, "*.")
	if !ok || strings.HasPrefix(host, "*.") {
		return false
	}
	_, hrest, ok := strings.Cut(host, ".")
	return ok && hrest == rest
}
