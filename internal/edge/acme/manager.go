package acme

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/certmagic"
)

// Manager obtains and renews the certificates of a set of names. It is a
// certs.Source for TLS listeners with tls.acme and answers HTTP-01
// challenges for plain listeners. New starts nothing; Run does the work
// until its context ends. Safe for concurrent use.
type Manager struct {
	opts Options

	// ready holds the names whose certificate is in the cache, read on
	// every handshake; replaced whole, never modified.
	ready atomic.Pointer[map[string]bool]
	live  atomic.Pointer[running] // nil until Run has started

	mu       sync.Mutex // guards names, failures, changed
	names    []string
	failures map[string]int
	changed  chan struct{} // signalled by SetNames, read by Run
}

// running is what Run built; handshakes and challenges read it.
type running struct {
	cfg    *certmagic.Config
	issuer *certmagic.ACMEIssuer
	cache  *certmagic.Cache
}

// New returns a manager for o. Nothing runs until Run.
func New(o Options) *Manager {
	if o.RenewCheck <= 0 {
		o.RenewCheck = DefaultRenewCheck
	}
	m := &Manager{opts: o, failures: map[string]int{}, changed: make(chan struct{}, 1)}
	m.ready.Store(&map[string]bool{})
	return m
}

// SetNames sets the host names to hold certificates for (the exact hosts
// of the routes on listeners with tls.acme that no certificate file
// covers; wildcards need DNS-01 and are skipped). Names added are ordered
// or loaded from storage; names removed stop being served and renewed.
func (m *Manager) SetNames(names []string) {
	var clean []string
	for _, n := range names {
		if n != "" && !isWildcard(n) && !slices.Contains(clean, n) {
			clean = append(clean, n)
		}
	}
	slices.Sort(clean)
	m.mu.Lock()
	m.names = clean
	m.mu.Unlock()
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

func isWildcard(n string) bool { return len(n) > 1 && n[0] == '*' }

// Manages reports whether the manager has a certificate for name (lower
// case, no trailing dot): a handshake for it is answered by
// GetCertificate. Until a name's first certificate arrives, the listener's
// default certificate or unknown_sni policy applies.
func (m *Manager) Manages(name string) bool { return (*m.ready.Load())[name] }

// GetCertificate answers a handshake for a managed name, or an ACME
// TLS-ALPN-01 challenge.
func (m *Manager) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	r := m.live.Load()
	if r == nil {
		return nil, errors.New("acme: not running yet")
	}
	return r.cfg.GetCertificate(hello)
}

// HandleHTTPChallenge answers an ACME HTTP-01 challenge request started by
// this instance or another sharing its storage, and reports whether it did.
// Plain listeners call it before routing (HTTPHandler does).
func (m *Manager) HandleHTTPChallenge(w http.ResponseWriter, r *http.Request) bool {
	rn := m.live.Load()
	if rn == nil || !m.opts.HTTP01 {
		return false
	}
	return rn.issuer.HandleHTTPChallenge(w, r)
}

// HTTPHandler answers HTTP-01 challenges and hands every other request to
// next. Put it outside forcehttps.Redirect.
func (m *Manager) HTTPHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !m.HandleHTTPChallenge(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// Run manages the names until ctx ends: it loads certificates from
// storage or orders them, renews them, staples OCSP, and follows SetNames.
func (m *Manager) Run(ctx context.Context) error {
	o := m.opts
	if !o.Agree {
		return fmt.Errorf("acme: the CA's terms of service were not accepted (acme.agree)")
	}
	if err := os.MkdirAll(o.Storage, 0o700); err != nil {
		return fmt.Errorf("acme: cannot create the storage directory: %w", err)
	}
	if err := checkStorage(o.Storage); err != nil {
		return fmt.Errorf("acme: %w", err)
	}
	// certmagic looks for certificates to renew every RenewCheck, fixed
	// when its cache is made: longer than the whole life of a short
	// certificate. Once the certificates held call for a shorter look, the
	// cache is made again with it (their files are loaded before the new
	// cache serves, so no handshake goes without).
	every := o.RenewCheck
	var prev *running
	for {
		r, managed, err := m.start(ctx, every, prev)
		if err != nil {
			if prev != nil {
				m.live.Store(nil)
				prev.cache.Stop()
			}
			return err
		}
		next, err := m.follow(ctx, r, managed, every)
		if next == 0 || err != nil {
			m.live.Store(nil)
			r.cache.Stop()
			return err
		}
		if m.opts.Log != nil {
			m.opts.Log.Info("acme: the certificates held are short-lived; renewals are now looked for more often", "every", next)
		}
		every, prev = next, r
	}
}

// renewCheckFor is how often to look for renewals of certs: a twentieth
// of the shortest lifetime (certmagic renews at a third of it left, or at
// the CA's suggested window (ARI), or when less than 5 looks are left),
// at least a second, at most RenewCheck.
func (m *Manager) renewCheckFor(certs []Certificate) time.Duration {
	d := m.opts.RenewCheck
	for _, c := range certs {
		d = min(d, c.NotAfter.Sub(c.NotBefore)/20)
	}
	return max(d, time.Second)
}

// start builds the ACME library's cache and config for a look every
// every. With prev (a restart), the names prev had are loaded from
// storage first and prev's cache is stopped once the new one serves.
func (m *Manager) start(ctx context.Context, every time.Duration, prev *running) (*running, []string, error) {
	o := m.opts
	log := newZap(o.Log)
	var cfg *certmagic.Config
	cache := certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert:   func(certmagic.Certificate) (*certmagic.Config, error) { return cfg, nil },
		RenewCheckInterval: every,
		Logger:             log,
	})
	cfg = certmagic.New(cache, certmagic.Config{
		// Renew at about two thirds of the lifetime, with a little jitter
		// so that instances sharing storage do not all try at once; where
		// the CA suggests a window (ARI), in that window.
		RenewalWindowRatio: (1.0 / 3.0) * (0.9 + 0.2*rand.Float64()),
		Storage:            &certmagic.FileStorage{Path: o.Storage},
		OnEvent:            m.onEvent,
		Logger:             log,
	})
	// certmagic retries a failed order against Let's Encrypt's staging CA
	// only when the CA is Let's Encrypt's production one.
	issuer := certmagic.NewACMEIssuer(cfg, certmagic.ACMEIssuer{
		CA:                      o.Directory,
		Email:                   o.Email,
		Agreed:                  o.Agree,
		TrustedRoots:            o.Roots,
		DisableHTTPChallenge:    !o.HTTP01,
		DisableTLSALPNChallenge: !o.TLSALPN01,
		Logger:                  log,
	})
	pointAt(issuer, o.HTTPAddr, &issuer.AltHTTPPort)
	pointAt(issuer, o.TLSAddr, &issuer.AltTLSALPNPort)
	cfg.Issuers = []certmagic.Issuer{issuer}
	r := &running{cfg: cfg, issuer: issuer, cache: cache}
	var managed []string
	if prev != nil {
		managed = sortedKeys(*m.ready.Load())
		if err := cfg.ManageSync(ctx, managed); err != nil {
			cache.Stop()
			return nil, nil, fmt.Errorf("acme: %w", err)
		}
	}
	m.live.Store(r)
	if prev != nil {
		prev.cache.Stop()
	}
	return r, managed, nil
}

// follow manages the names SetNames gives until ctx ends (0), or until
// the certificates held call for looking for renewals more often than
// every (that interval).
func (m *Manager) follow(ctx context.Context, r *running, managed []string, every time.Duration) (time.Duration, error) {
	lookEvery := min(every, 10*time.Second)
	look := time.NewTicker(lookEvery)
	defer look.Stop()
	for {
		m.mu.Lock()
		want := m.names
		m.mu.Unlock()
		var added, removed []string
		for _, n := range want {
			if !slices.Contains(managed, n) {
				added = append(added, n)
			}
		}
		for _, n := range managed {
			if !slices.Contains(want, n) {
				removed = append(removed, n)
			}
		}
		if len(removed) > 0 {
			subjects := make([]certmagic.SubjectIssuer, len(removed))
			for i, n := range removed {
				subjects[i] = certmagic.SubjectIssuer{Subject: n}
			}
			r.cache.RemoveManaged(subjects)
			m.setReady(removed, false)
		}
		if len(added) > 0 {
			// Asynchronous: one name's failure (retried with backoff for
			// up to 30 days) does not hold up the others.
			if err := r.cfg.ManageAsync(ctx, added); err != nil {
				return 0, fmt.Errorf("acme: %w", err)
			}
		}
		managed = want
		for {
			select {
			case <-ctx.Done():
				return 0, nil
			case <-m.changed:
			case <-look.C:
				if next := m.renewCheckFor(m.Certificates()); next < every*9/10 {
					return next, nil
				}
				continue
			}
			break
		}
	}
}

// pointAt tells the ACME library where sturdy's listener for a challenge
// is, so that it finds the port taken and never binds one itself.
func pointAt(is *certmagic.ACMEIssuer, addr string, port *int) {
	if addr == "" {
		return
	}
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return
	}
	*port, _ = strconv.Atoi(p)
	if host != "" && host != "0.0.0.0" && host != "::" {
		is.ListenHost = host
	}
}

func (m *Manager) setReady(names []string, on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	next := map[string]bool{}
	for k := range *m.ready.Load() {
		next[k] = true
	}
	for _, n := range names {
		if on && slices.Contains(m.names, n) {
			next[n] = true
		} else if !on {
			delete(next, n)
		}
	}
	m.ready.Store(&next)
}

// Certificate is one managed certificate's validity, for a metric.
type Certificate struct {
	Name                string
	NotBefore, NotAfter time.Time
}

// Certificates returns the certificates held now, by name.
func (m *Manager) Certificates() []Certificate {
	r := m.live.Load()
	if r == nil {
		return nil
	}
	var out []Certificate
	for _, n := range sortedKeys(*m.ready.Load()) {
		for _, c := range r.cache.AllMatchingCertificates(n) {
			if c.Leaf != nil {
				out = append(out, Certificate{Name: n, NotBefore: c.Leaf.NotBefore, NotAfter: c.Leaf.NotAfter})
				break
			}
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
