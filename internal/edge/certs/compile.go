package certs

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// ACMEProtocol is the ALPN protocol of ACME TLS-ALPN-01 challenges
// (RFC 8737).
const ACMEProtocol = "acme-tls/1"

// Listener is the compiled TLS of one listener: its certificates and the
// settings every handshake gets. It never changes once built.
type Listener struct {
	// Name is the listener's name.
	Name string
	// Store chooses the certificate.
	Store *Store
	// HSTS is the Strict-Transport-Security value, "" when off.
	HSTS string
	// VerifiesClients is true when client certificates are checked
	// against a CA, so that routes can require a verified one.
	VerifiesClients bool

	refuse    *tls.Config // no certificate: the handshake ends with unrecognized_name
	challenge *tls.Config // ACME TLS-ALPN-01; nil without a Source
	dynamic   *tls.Config // the settings with the Source's certificates
}

// Compile reads the certificates and CA bundles of every TLS listener in
// c and builds their runtime form, keyed by listener name. src supplies
// the certificates of listeners with tls.acme (nil when there is no ACME).
// The error is a config.ErrorList naming file, line and key of each
// problem, so that check and reload print every one at once. Files are
// read through read (os.ReadFile, or the compile's own reads).
func Compile(c *config.Config, src Source, read func(string) ([]byte, error)) (map[string]*Listener, error) {
	out := map[string]*Listener{}
	var errs config.ErrorList
	for i, l := range c.Listeners {
		if l.TLS == nil {
			continue
		}
		var s Source
		if l.TLS.ACME {
			s = src
		}
		cl, err := CompileListener(c, i, s, read)
		if err != nil {
			errs = append(errs, err.(config.ErrorList)...)
			continue
		}
		out[l.Name] = cl
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

func sorted(errs config.ErrorList) config.ErrorList {
	slices.SortStableFunc(errs, func(a, b config.Error) int { return a.Line - b.Line })
	return errs
}

// CompileListener compiles listeners[i] of c, which must have tls set,
// reading its certificates, keys and client CA bundle through read once
// each: the caller that hashes those files hashes the bytes served.
func CompileListener(c *config.Config, i int, src Source, read func(string) ([]byte, error)) (*Listener, error) {
	l := c.Listeners[i]
	t := l.TLS
	p := fmt.Sprintf("listeners[%d].tls", i)
	var errs config.ErrorList
	fail := func(path, format string, args ...any) {
		errs = append(errs, config.Error{File: c.File, Line: c.Line(path), Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	base, err := settings(t)
	if err != nil {
		fail(p, "%v", err)
	}
	if t.ClientAuth.CA != "" {
		pool, err := ReadPool(read, t.ClientAuth.CA)
		if err != nil {
			fail(p+".client_auth.ca", "%v", err)
		}
		base.ClientCAs = pool
	}
	entries := t.Certificates
	entryPath := p + ".certificates[%d]"
	if t.Cert != "" {
		entries = []config.Certificate{{Cert: t.Cert, Key: t.Key}}
		entryPath = p
	}
	var list []*Cert
	hasDefault := false
	for j, e := range entries {
		cp := entryPath
		if strings.Contains(cp, "%d") {
			cp = fmt.Sprintf(entryPath, j)
		}
		ct, err := loadCert(read, e, cp)
		if err != nil {
			fail(cp, "%v", err)
			continue
		}
		hasDefault = hasDefault || ct.Default
		list = append(list, ct)
	}
	if len(errs) > 0 {
		return nil, sorted(errs)
	}
	if !hasDefault && len(list) > 0 {
		list[0].Default = true
	}
	for _, ct := range list {
		if len(ct.Names) == 0 && !ct.Default {
			fail(ct.Path, "%s has no DNS names in its SANs and is not the default, so no client could get it; set names or default: true", ct.File)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	for _, ct := range list {
		ct.config = base.Clone()
		ct.config.Certificates = []tls.Certificate{*ct.chain}
		ct.chain = nil
	}
	out := &Listener{
		Name:            l.Name,
		Store:           newStore(list, t.UnknownSNI == "refuse", src),
		VerifiesClients: t.ClientAuth.VerifiesClients(),
		refuse:          base.Clone(),
	}
	if h := t.HSTS; h != nil {
		out.HSTS = hstsValue(h)
	}
	if src != nil {
		out.dynamic = base.Clone()
		out.dynamic.GetCertificate = src.GetCertificate
		// The CA's validator shows no client certificate and speaks only
		// acme-tls/1, whatever the listener asks of browsers.
		out.challenge = &tls.Config{
			MinVersion:     tls.VersionTLS12,
			NextProtos:     []string{ACMEProtocol},
			GetCertificate: src.GetCertificate,
		}
	}
	return out, nil
}

// settings is the tls.Config every handshake of the listener shares,
// without certificates.
func settings(t *config.TLS) (*tls.Config, error) {
	cfg := &tls.Config{
		MinVersion:             config.TLSVersions[t.MinVersion],
		NextProtos:             slices.Clone(t.ALPN),
		SessionTicketsDisabled: t.SessionTickets != nil && !*t.SessionTickets,
	}
	for _, name := range t.CipherSuites {
		id, err := config.CipherSuite(name)
		if err != nil {
			return cfg, err
		}
		cfg.CipherSuites = append(cfg.CipherSuites, id)
	}
	switch t.ClientAuth.Mode {
	case config.ClientAuthRequest:
		cfg.ClientAuth = tls.RequestClientCert
	case config.ClientAuthRequire:
		cfg.ClientAuth = tls.RequireAnyClientCert
	case config.ClientAuthVerifyIfGiven:
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case config.ClientAuthRequireAndVerify:
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	if t.ClientAuth.VerifiesClients() {
		// Tickets of this compiled listener die with it: a session resumed
		// after a reload that changed the CA would skip verification.
		var key [32]byte
		if _, err := rand.Read(key[:]); err != nil {
			return cfg, fmt.Errorf("cannot make session ticket keys: %v", err)
		}
		cfg.SetSessionTicketKeys([][32]byte{key})
	}
	return cfg, nil
}

func loadCert(read func(string) ([]byte, error), e config.Certificate, path string) (*Cert, error) {
	var pair tls.Certificate
	var err error
	if e.CertPEM != nil || e.KeyPEM != nil {
		pair, err = tls.X509KeyPair(e.CertPEM, e.KeyPEM)
	} else {
		pair, err = loadPair(read, e.Cert, e.Key)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot load certificate %s with key %s: %v", e.Cert, e.Key, err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("cannot parse certificate %s: %v", e.Cert, err)
		}
		pair.Leaf = leaf
	}
	names := e.Names
	if len(names) == 0 {
		for _, n := range leaf.DNSNames {
			names = append(names, normalize(n))
		}
	}
	return &Cert{
		Names: names, NotBefore: leaf.NotBefore, NotAfter: leaf.NotAfter,
		File: e.Cert, Path: path, Default: e.Default,
		leaf: leaf, chain: &pair,
	}, nil
}

// ReadPool reads a PEM bundle of CA certificates through read.
func ReadPool(read func(string) ([]byte, error), file string) (*x509.CertPool, error) {
	b, err := read(file)
	if err != nil {
		return nil, fmt.Errorf("cannot read the CA file: %v", err)
	}
	pool := x509.NewCertPool()
	if pool.AppendCertsFromPEM(b) {
		return pool, nil
	}
	for rest := b; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			return nil, fmt.Errorf("no PEM certificate in %s; expected CERTIFICATE blocks", file)
		}
		if blk.Type == "CERTIFICATE" {
			return nil, fmt.Errorf("no usable certificate in %s: the CERTIFICATE blocks do not parse", file)
		}
	}
}

func hstsValue(h *config.HSTS) string {
	v := "max-age=" + strconv.FormatInt(int64(h.MaxAge.D()/time.Second), 10)
	if h.IncludeSubdomains {
		v += "; includeSubDomains"
	}
	if h.Preload {
		v += "; preload"
	}
	return v
}

// ConfigForClient picks the handshake's settings and certificate: it is
// tls.Config.GetConfigForClient for this compiled listener (Handle calls
// it on the current one). Each file certificate has its own prebuilt
// tls.Config, so a handshake costs two map look-ups and allocates nothing
// here.
func (l *Listener) ConfigForClient(hello *tls.ClientHelloInfo) (*tls.Config, error) {
	if l.challenge != nil && len(hello.SupportedProtos) == 1 && hello.SupportedProtos[0] == ACMEProtocol {
		return l.challenge, nil
	}
	if c := l.Store.Lookup(hello.ServerName); c != nil {
		return c.config, nil
	}
	if l.dynamic != nil && hello.ServerName != "" && l.Store.source.Manages(normalize(hello.ServerName)) {
		return l.dynamic, nil
	}
	return l.refuse, nil
}
