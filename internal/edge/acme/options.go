// Package acme obtains and renews certificates from an ACME (RFC 8555) CA
// for the host names of sturdy's routes, with certmagic: HTTP-01 answered
// on plain listeners, TLS-ALPN-01 on TLS listeners, the account and
// certificates in a storage directory that several instances may share
// (one orders while the others wait on its lock and then load the result),
// renewal at about two thirds of the lifetime with backoff, and OCSP
// stapling. What happens is reported through a callback (Event).
package acme

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/edge/certs"
)

// Options configure a Manager. Compile builds them from the config.
type Options struct {
	// Directory is the CA's directory URL.
	Directory string
	// Email is the account's contact ("" for none).
	Email string
	// Agree accepts the CA's terms of service; without it nothing is ordered.
	Agree bool
	// Roots verify the ACME server's HTTPS certificate; nil: the system's.
	Roots *x509.CertPool
	// Storage is the directory of the account and certificates.
	Storage string
	// HTTP01 and TLSALPN01 enable the challenge types.
	HTTP01, TLSALPN01 bool
	// HTTPAddr and TLSAddr are the addresses (host:port) of the listeners
	// that answer the challenges. The ACME library binds a challenge port
	// itself only when nothing listens there; pointing it at sturdy's own
	// listeners keeps it from ever doing so.
	HTTPAddr, TLSAddr string
	// OnEvent receives every issuance, renewal and failure. It must not
	// block for long: it runs on the renewal goroutine. nil: none.
	OnEvent func(Event)
	// Log receives the ACME library's own messages at debug level.
	// nil: discarded.
	Log *slog.Logger
	// RenewCheck is how often certificates are checked for renewal.
	// Default 10m.
	RenewCheck time.Duration
}

// DefaultRenewCheck is how often certificates are checked for renewal.
const DefaultRenewCheck = 10 * time.Minute

// Compile builds the Options of c.ACME (nil when the config has no acme
// section): it reads ca_root and checks that an existing storage directory
// is private. It creates nothing; Run creates the directory. The plain
// and TLS listeners answering challenges are taken from c: the first on
// port 80 (or else the first) plain listener, and the first on port 443
// (or else the first) TLS listener with tls.acme. ca_root is read
// through read (os.ReadFile, or the compile's own reads).
func Compile(c *config.Config, read func(string) ([]byte, error)) (*Options, error) {
	a := c.ACME
	if a == nil {
		return nil, nil
	}
	fail := func(path, format string, args ...any) error {
		return config.ErrorList{{File: c.File, Line: c.Line(path), Path: path, Msg: fmt.Sprintf(format, args...)}}
	}
	o := &Options{Directory: a.Directory, Email: a.Email, Agree: a.Agree, Storage: a.Storage}
	for _, ch := range a.Challenges {
		o.HTTP01 = o.HTTP01 || ch == config.ChallengeHTTP01
		o.TLSALPN01 = o.TLSALPN01 || ch == config.ChallengeTLSALPN01
	}
	if a.CARoot != "" {
		pool, err := certs.ReadPool(read, a.CARoot)
		if err != nil {
			return nil, fail("acme.ca_root", "%v", err)
		}
		o.Roots = pool
	}
	if err := checkStorage(a.Storage); err != nil {
		return nil, fail("acme.storage", "%v", err)
	}
	for _, l := range c.Listeners {
		switch {
		case l.TLS == nil && (o.HTTPAddr == "" || port(l.Listen) == 80 && port(o.HTTPAddr) != 80):
			o.HTTPAddr = l.Listen
		case l.TLS != nil && l.TLS.ACME && (o.TLSAddr == "" || port(l.Listen) == 443 && port(o.TLSAddr) != 443):
			o.TLSAddr = l.Listen
		}
	}
	return o, nil
}

func port(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

// checkStorage refuses a storage directory that others can read: it holds
// the account key and every certificate's private key.
func checkStorage(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot use the storage directory: %v", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s is open to other users (mode %04o) and will hold private keys; run chmod 700 %s", dir, fi.Mode().Perm(), dir)
	}
	return nil
}
