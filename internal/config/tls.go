package config

// The TLS side of the config: certificates chosen by SNI, protocol
// settings, client certificates, ACME, the redirect to HTTPS and HSTS
// (docs/tls.md). Validation here never reads a file: package certs and
// package acme read the certificates, keys and CA bundles when the config
// is compiled, and name the file and key when one is wrong.

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// TLS makes a listener HTTPS (with HTTP/2 unless alpn leaves h2 out).
type TLS struct {
	// Cert and Key are one certificate and key file (PEM): the short form
	// of a single entry in Certificates. Use one form or the other.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// Certificates are chosen per handshake by the name the client asks
	// for (SNI): exact names first, then wildcards.
	Certificates []Certificate `yaml:"certificates"`
	// UnknownSNI is what a client gets that sends no name, or a name no
	// certificate covers: "default" (the default certificate; the default)
	// or "refuse" (the handshake fails with an unrecognized_name alert).
	UnknownSNI string `yaml:"unknown_sni"`
	// ACME obtains and renews certificates (top-level acme) for the host
	// names of this listener's routes that no certificate file covers.
	// Default false.
	ACME bool `yaml:"acme"`
	// MinVersion is "1.2" (the default) or "1.3".
	MinVersion string `yaml:"min_version"`
	// CipherSuites are the TLS 1.2 suites offered, by their standard names
	// (TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, ...). Default: Go's list
	// of secure suites. TLS 1.3 suites are not configurable.
	CipherSuites []string `yaml:"cipher_suites"`
	// ALPN lists the application protocols offered, in order of
	// preference: h2 and http/1.1. Default [h2, http/1.1].
	ALPN []string `yaml:"alpn"`
	// SessionTickets allows TLS session resumption by tickets. Default true.
	SessionTickets *bool `yaml:"session_tickets"`
	// ClientAuth asks clients for certificates (mTLS).
	ClientAuth ClientAuth `yaml:"client_auth"`
	// HSTS, when set, adds Strict-Transport-Security to every answer.
	HSTS *HSTS `yaml:"hsts"`
}

// Certificate is one certificate and key on a TLS listener.
type Certificate struct {
	// Cert is the certificate chain file (PEM), leaf first. Required.
	Cert string `yaml:"cert"`
	// Key is the private key file (PEM). Required.
	Key string `yaml:"key"`
	// Names, when set, are the names (exact or *.wildcard) this
	// certificate is chosen for. Default: the DNS names in its SANs.
	Names []string `yaml:"names"`
	// Default marks the certificate for clients without SNI or with an
	// unknown name. At most one per listener. Default: the first entry.
	Default bool `yaml:"default"`
	// CertPEM and KeyPEM, when set, are the certificate and key
	// themselves, and Cert and Key only name where they came from
	// ("secret default/site-tls"): a source of config that holds
	// certificates in memory (Kubernetes Secrets) passes them this way
	// rather than writing key files to disk. Never read from YAML.
	CertPEM []byte `yaml:"-"`
	KeyPEM  []byte `yaml:"-"`
}

// ClientAuth is a listener's client-certificate policy.
type ClientAuth struct {
	// Mode is none (the default), request (ask, accept any or none),
	// require (any certificate, not verified), verify_if_given (verified
	// against CA when one is sent) or require_and_verify.
	Mode string `yaml:"mode"`
	// CA is a PEM bundle of the authorities client certificates must chain
	// to. Required for the verify modes, and only allowed with them.
	CA string `yaml:"ca"`
}

// HSTS is the Strict-Transport-Security header of a TLS listener.
type HSTS struct {
	// MaxAge is how long browsers keep to HTTPS. Default 8760h (a year).
	MaxAge Duration `yaml:"max_age"`
	// IncludeSubdomains extends the policy to every subdomain. Default false.
	IncludeSubdomains bool `yaml:"include_subdomains"`
	// Preload asks to be put on browsers' built-in lists; it needs
	// include_subdomains and a max_age of at least a year. Default false.
	Preload bool `yaml:"preload"`
}

// RedirectHTTPS makes a plain listener answer every request with a
// redirect to the same host and path over HTTPS, except ACME HTTP-01
// challenges (/.well-known/acme-challenge/).
type RedirectHTTPS struct {
	// Status is 308 (the default: the method and body are kept), 301 or
	// 302 (Gateway API's default for a RequestRedirect).
	Status int `yaml:"status"`
	// Port is the HTTPS port in the Location; 443 (the default) is left out.
	Port int `yaml:"port"`
}

// ACME obtains and renews certificates from an ACME (RFC 8555) CA for the
// listeners with tls.acme: true.
type ACME struct {
	// Directory is the CA's directory URL. Default: Let's Encrypt's
	// production directory.
	Directory string `yaml:"directory"`
	// Email is the account's contact, for the CA's expiry notices.
	// Default: none (sturdy check warns).
	Email string `yaml:"email"`
	// Agree accepts the CA's terms of service. Required: true.
	Agree bool `yaml:"agree"`
	// CARoot is a PEM file of the roots that sign the ACME server's own
	// HTTPS certificate (a private CA, a test CA). Default: the system's.
	CARoot string `yaml:"ca_root"`
	// Storage is the directory for the account and certificates, created
	// with mode 0700. Instances sharing it take turns: one orders, the
	// others load. Default /var/lib/sturdy/acme.
	Storage string `yaml:"storage"`
	// Challenges are the challenge types used: http-01 (answered on plain
	// listeners, port 80 for a public CA) and tls-alpn-01 (answered on TLS
	// listeners with acme: true, port 443). Default both.
	Challenges []string `yaml:"challenges"`
}

// Route client-certificate requirements (routes[].client_cert).
const (
	ClientCertNone     = "none"
	ClientCertRequired = "required"
)

// Client authentication modes (listeners[].tls.client_auth.mode).
const (
	ClientAuthNone             = "none"
	ClientAuthRequest          = "request"
	ClientAuthRequire          = "require"
	ClientAuthVerifyIfGiven    = "verify_if_given"
	ClientAuthRequireAndVerify = "require_and_verify"
)

// ACME challenge types.
const (
	ChallengeHTTP01    = "http-01"
	ChallengeTLSALPN01 = "tls-alpn-01"
)

// TLS defaults. docs/tls.md lists the same values.
const (
	DefaultUnknownSNI    = "default"
	DefaultMinVersion    = "1.2"
	DefaultHSTSMaxAge    = 365 * 24 * time.Hour
	DefaultRedirectCode  = 308
	DefaultRedirectPort  = 443
	DefaultACMEDirectory = "https://acme-v02.api.letsencrypt.org/directory"
	DefaultACMEStorage   = "/var/lib/sturdy/acme"
)

// DefaultALPN is offered when a listener's tls.alpn is not set.
var DefaultALPN = []string{"h2", "http/1.1"}

// TLSVersions maps min_version values to crypto/tls versions.
var TLSVersions = map[string]uint16{"1.2": tls.VersionTLS12, "1.3": tls.VersionTLS13}

// VerifiesClients reports whether the mode checks client certificates
// against a CA, so that routes may require a verified certificate.
func (a ClientAuth) VerifiesClients() bool {
	return a.Mode == ClientAuthVerifyIfGiven || a.Mode == ClientAuthRequireAndVerify
}

func (c *Config) setTLSDefaults() {
	for i := range c.Listeners {
		l := &c.Listeners[i]
		if r := l.RedirectHTTPS; r != nil {
			if r.Status == 0 {
				r.Status = DefaultRedirectCode
			}
			if r.Port == 0 {
				r.Port = DefaultRedirectPort
			}
		}
		t := l.TLS
		if t == nil {
			continue
		}
		if t.UnknownSNI == "" {
			t.UnknownSNI = DefaultUnknownSNI
		}
		if t.MinVersion == "" {
			t.MinVersion = DefaultMinVersion
		}
		if t.ALPN == nil {
			t.ALPN = slices.Clone(DefaultALPN)
		}
		if t.ClientAuth.Mode == "" {
			t.ClientAuth.Mode = ClientAuthNone
		}
		if t.HSTS != nil && t.HSTS.MaxAge == 0 && !c.Has(fmt.Sprintf("listeners[%d].tls.hsts.max_age", i)) {
			t.HSTS.MaxAge = Duration(DefaultHSTSMaxAge)
		}
		for j := range t.Certificates {
			for k, n := range t.Certificates[j].Names {
				t.Certificates[j].Names[k] = strings.ToLower(n)
			}
		}
	}
	for i := range c.Routes {
		if c.Routes[i].ClientCert == "" {
			c.Routes[i].ClientCert = ClientCertNone
		}
	}
	if a := c.ACME; a != nil {
		if a.Directory == "" {
			a.Directory = DefaultACMEDirectory
		}
		if a.Storage == "" {
			a.Storage = DefaultACMEStorage
		}
		if a.Challenges == nil {
			a.Challenges = []string{ChallengeHTTP01, ChallengeTLSALPN01}
		}
	}
}

func (v *validator) tls() {
	c := v.c
	for i, l := range c.Listeners {
		p := fmt.Sprintf("listeners[%d]", i)
		if l.TLS != nil {
			v.listenerTLS(p+".tls", l.TLS)
		}
		if r := l.RedirectHTTPS; r != nil {
			if l.TLS != nil {
				v.errorf(p+".redirect_https", "this listener is already HTTPS; put redirect_https on the plain listener (port 80)")
			}
			if r.Status != 301 && r.Status != 302 && r.Status != 308 {
				v.errorf(p+".redirect_https.status", "status %d; expected 308 (keeps the method), 301 or 302", r.Status)
			}
			if r.Port < 1 || r.Port > 65535 {
				v.errorf(p+".redirect_https.port", "port %d out of range; expected 1 to 65535", r.Port)
			}
		}
	}
	for i, r := range c.Routes {
		if r.ClientCert != ClientCertNone && r.ClientCert != ClientCertRequired {
			v.errorf(fmt.Sprintf("routes[%d].client_cert", i), "unknown requirement %q; expected none or required (a certificate verified against the listener's client_auth.ca)", r.ClientCert)
		}
	}
	for i, pl := range c.Pools {
		if t := pl.TLS; t != nil && (t.Cert == "") != (t.Key == "") {
			v.errorf(fmt.Sprintf("pools[%d].tls", i), "cert and key go together; set both (a client certificate for the backends) or neither")
		}
	}
	v.acme()
}

func (v *validator) listenerTLS(p string, t *TLS) {
	if t.Cert != "" || t.Key != "" {
		if len(t.Certificates) > 0 {
			v.errorf(p, "both cert/key and certificates are set; move cert and key into certificates as one more entry")
		}
		if t.Cert == "" {
			v.errorf(p+".cert", "missing; key is set, so a certificate file (PEM) is needed too")
		}
		if t.Key == "" {
			v.errorf(p+".key", "missing; cert is set, so a private key file (PEM) is needed too")
		}
	} else if len(t.Certificates) == 0 && !t.ACME {
		v.errorf(p, "no certificate; set cert and key, certificates, or acme: true")
	}
	defaultAt := -1
	for j, ct := range t.Certificates {
		cp := fmt.Sprintf("%s.certificates[%d]", p, j)
		if ct.Cert == "" {
			v.errorf(cp+".cert", "missing; expected a certificate file (PEM)")
		}
		if ct.Key == "" {
			v.errorf(cp+".key", "missing; expected a private key file (PEM)")
		}
		for k, n := range ct.Names {
			if err := checkHostPattern(n); err != nil {
				v.errorf(fmt.Sprintf("%s.names[%d]", cp, k), "%v", err)
			}
		}
		if ct.Default {
			if defaultAt >= 0 {
				v.errorf(cp+".default", "certificates[%d] is already the default; only one may be", defaultAt)
			}
			defaultAt = j
		}
	}
	if t.ACME && v.c.ACME == nil {
		v.errorf(p+".acme", "acme: true needs the top-level acme section (at least agree: true)")
	}
	if t.UnknownSNI != "default" && t.UnknownSNI != "refuse" {
		v.errorf(p+".unknown_sni", "unknown policy %q; expected default or refuse", t.UnknownSNI)
	}
	if _, ok := TLSVersions[t.MinVersion]; !ok {
		v.errorf(p+".min_version", "unknown version %q; expected \"1.2\" or \"1.3\"", t.MinVersion)
	}
	if len(t.CipherSuites) > 0 && t.MinVersion == "1.3" {
		v.errorf(p+".cipher_suites", "cipher_suites choose TLS 1.2 suites, but min_version is 1.3; remove one of them")
	}
	for j, name := range t.CipherSuites {
		if _, err := CipherSuite(name); err != nil {
			v.errorf(fmt.Sprintf("%s.cipher_suites[%d]", p, j), "%v", err)
		}
	}
	if len(t.CipherSuites) > 0 && slices.Contains(t.ALPN, "h2") &&
		!slices.Contains(t.CipherSuites, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") && !slices.Contains(t.CipherSuites, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256") {
		v.errorf(p+".cipher_suites", "HTTP/2 (alpn h2) requires TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 or TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 (RFC 9113 section 9.2.2); add one, or set alpn: [ http/1.1 ]")
	}
	if len(t.ALPN) == 0 {
		v.errorf(p+".alpn", "empty; expected h2 and/or http/1.1, or leave alpn out for both")
	}
	for j, proto := range t.ALPN {
		if proto != "h2" && proto != "http/1.1" {
			v.errorf(fmt.Sprintf("%s.alpn[%d]", p, j), "unknown protocol %q; expected h2 or http/1.1 (acme-tls/1 is added by acme: true)", proto)
		}
	}
	a := t.ClientAuth
	switch a.Mode {
	case ClientAuthNone, ClientAuthRequest, ClientAuthRequire:
		if a.CA != "" {
			v.errorf(p+".client_auth.ca", "a CA is only used by mode verify_if_given or require_and_verify; mode is %s", a.Mode)
		}
	case ClientAuthVerifyIfGiven, ClientAuthRequireAndVerify:
		if a.CA == "" {
			v.errorf(p+".client_auth.ca", "missing; mode %s verifies client certificates against a CA bundle (PEM)", a.Mode)
		}
	default:
		v.errorf(p+".client_auth.mode", "unknown mode %q; expected none, request, require, verify_if_given or require_and_verify", a.Mode)
	}
	if h := t.HSTS; h != nil {
		if h.MaxAge < Duration(time.Second) {
			v.errorf(p+".hsts.max_age", "max_age %s; expected at least 1s (leave hsts out to send no header)", h.MaxAge)
		}
		if h.Preload && (!h.IncludeSubdomains || h.MaxAge.D() < DefaultHSTSMaxAge) {
			v.errorf(p+".hsts.preload", "preload lists require include_subdomains: true and max_age of at least 8760h")
		}
	}
}

func (v *validator) acme() {
	a := v.c.ACME
	if a == nil {
		return
	}
	if !a.Agree {
		v.errorf("acme.agree", "set agree: true to accept the terms of service of the CA at %s; sturdy cannot order certificates without it", a.Directory)
	}
	if u, err := url.Parse(a.Directory); err != nil || u.Scheme != "https" || u.Host == "" {
		v.errorf("acme.directory", "invalid directory %q; expected an https URL like %s", a.Directory, DefaultACMEDirectory)
	}
	if a.Email != "" && !strings.Contains(a.Email, "@") {
		v.errorf("acme.email", "invalid email %q; expected an address like ops@example.com", a.Email)
	}
	if len(a.Challenges) == 0 {
		v.errorf("acme.challenges", "empty; expected http-01 and/or tls-alpn-01, or leave challenges out for both")
	}
	for i, ch := range a.Challenges {
		if ch != ChallengeHTTP01 && ch != ChallengeTLSALPN01 {
			v.errorf(fmt.Sprintf("acme.challenges[%d]", i), "unknown challenge %q; expected http-01 or tls-alpn-01", ch)
		}
	}
}

// CipherSuite returns the ID of a TLS 1.2 cipher suite by its standard
// name; insecure and TLS 1.3 suites are errors that say why.
func CipherSuite(name string) (uint16, error) {
	for _, s := range tls.CipherSuites() {
		if s.Name == name {
			if !slices.Contains(s.SupportedVersions, tls.VersionTLS12) {
				return 0, fmt.Errorf("%s is a TLS 1.3 suite; TLS 1.3 suites are always on and not configurable", name)
			}
			return s.ID, nil
		}
	}
	for _, s := range tls.InsecureCipherSuites() {
		if s.Name == name {
			return 0, fmt.Errorf("%s is insecure and not offered; choose from %s", name, strings.Join(secureSuites(), ", "))
		}
	}
	return 0, fmt.Errorf("unknown cipher suite %q; expected one of %s", name, strings.Join(secureSuites(), ", "))
}

func secureSuites() []string {
	var names []string
	for _, s := range tls.CipherSuites() {
		if slices.Contains(s.SupportedVersions, tls.VersionTLS12) {
			names = append(names, s.Name)
		}
	}
	return names
}
