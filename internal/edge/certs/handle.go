package certs

import (
	"crypto/tls"
	"maps"
	"slices"
	"sync/atomic"
	"time"
)

// Handle is a listener's TLS across reloads: the http.Server keeps the
// tls.Config of TLSConfig for the life of its socket, and every handshake
// reads the Listener swapped in last. Handshakes already done keep what
// they got. Safe for concurrent use.
type Handle struct {
	cur atomic.Pointer[Listener]
}

// NewHandle returns a handle serving l.
func NewHandle(l *Listener) *Handle {
	h := &Handle{}
	h.cur.Store(l)
	return h
}

// Swap makes new handshakes use l.
func (h *Handle) Swap(l *Listener) { h.cur.Store(l) }

// Load returns the listener's current compiled TLS.
func (h *Handle) Load() *Listener { return h.cur.Load() }

// TLSConfig is the config to give the http.Server (TLSConfig, then
// ServeTLS(ln, "", "")). Session ticket keys live here, so that sessions
// resume across reloads, except on listeners that verify client
// certificates, whose keys change with each compiled Listener. A server
// that keeps the compiled Listener in its own runtime can do the same with
// GetConfigForClient calling the current Listener's ConfigForClient.
func (h *Handle) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			return h.cur.Load().ConfigForClient(hello)
		},
	}
}

// Expiry is one certificate's end of validity, for a metric.
type Expiry struct {
	Listener string
	Names    []string
	NotAfter time.Time
}

// Expiries returns the end of validity of every file certificate of the
// compiled listeners, in config order of the certificates.
func Expiries(ls map[string]*Listener) []Expiry {
	var out []Expiry
	for _, name := range slices.Sorted(maps.Keys(ls)) {
		l := ls[name]
		for _, c := range l.Store.certs {
			out = append(out, Expiry{Listener: l.Name, Names: c.Names, NotAfter: c.NotAfter})
		}
	}
	return out
}
