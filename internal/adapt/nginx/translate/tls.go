package translate

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// TLS per listener (docs/tls.md): every server block's certificate,
// chosen by the names of its server_name (SNI); ssl_reject_handshake on
// the default server; ssl_protocols, ssl_ciphers and client certificates;
// Strict-Transport-Security sent by every server of a listener.

// certEntry is one certificate of a TLS listener.
type certEntry struct {
	cert, key string
	names     []string // nil: the names in the certificate
	sans      bool     // a server without names uses it: names stay nil
	def       bool
	from      *nginx.Directive
}

// tlsPlan is what a TLS listener's tls block says besides certificates.
type tlsPlan struct {
	refuseUnknown bool
	minVersion    string
	ciphers       []string
	clientAuth    config.ClientAuth
	hsts          *config.HSTS
}

// tlsServers returns the servers listening with TLS on ln, the default
// server first.
func (t *translator) tlsServers(ln *listener) []*nginx.Server {
	var out []*nginx.Server
	for _, srv := range t.site.Servers {
		for _, l := range srv.Listens {
			if t.listenerOf[l.Addr] == ln && (l.SSL || serverSSL(srv)) {
				if t.site.Defaults[l.Addr] == srv {
					out = append([]*nginx.Server{srv}, out...)
				} else {
					out = append(out, srv)
				}
				break
			}
		}
	}
	return out
}

// certificates gives each TLS listener the certificate of every server on
// it, named by the server's names, the default server's as the default.
func (t *translator) certificates() {
	for _, ln := range t.listenersOut {
		if !ln.ssl {
			continue
		}
		servers := t.tlsServers(ln)
		byFile := map[string]*certEntry{}
		for i, srv := range servers {
			if d := srv.Get1("ssl_reject_handshake"); d != nil && d.Arg(0) == "on" {
				t.use(d)
				if i == 0 {
					ln.tls.refuseUnknown = true
					ln.comments = append(ln.comments, fmt.Sprintf("ssl_reject_handshake on in the default server (%s): clients that ask for no name, or a name no certificate is for, are refused in the handshake", d.Pos()))
				}
				continue
			}
			certs, keys := srv.Get("ssl_certificate"), srv.Get("ssl_certificate_key")
			if len(certs) == 0 || len(keys) == 0 {
				continue
			}
			cert, key := certs[0], keys[0]
			if strings.Contains(cert.Arg(0), "$") || strings.HasPrefix(cert.Arg(0), "data:") {
				t.sni[srv] = cert
				t.skip(cert, "certificates chosen by variables or inlined as data: are not supported; sturdy loads certificate files")
				continue
			}
			t.use(cert, key)
			for _, extra := range certs[1:] {
				if !t.used[extra] {
					t.skip(extra, "a second certificate for the same names (e.g. ECDSA next to RSA): sturdy serves one certificate per name")
				}
			}
			for _, extra := range keys[1:] {
				t.use(extra)
			}
			path := t.certPath(cert.Arg(0))
			e := byFile[path]
			if e == nil {
				e = &certEntry{cert: path, key: t.certPath(key.Arg(0)), from: cert}
				byFile[path] = e
				ln.certs = append(ln.certs, e)
			}
			hosts, _ := t.serverHosts(srv)
			switch {
			case len(hosts) == 0:
				e.sans = true // a server without names: the names in the certificate
			case !e.sans:
				for _, h := range hosts {
					e.names = appendOnce(e.names, h)
				}
			}
			e.def = e.def || i == 0
		}
		for _, e := range ln.certs {
			if e.sans {
				e.names = nil
			}
		}
		// Entries with names first: a certificate without names stands for
		// the names in its file, and the first entry that holds a name wins.
		slices.SortStableFunc(ln.certs, func(a, b *certEntry) int {
			return boolInt(a.names == nil) - boolInt(b.names == nil)
		})
		if len(ln.certs) == 1 && !ln.tls.refuseUnknown {
			// With ssl_reject_handshake, nginx served it only for its
			// servers' names: those stay.
			ln.certs[0].names, ln.certs[0].def = nil, false
		}
		if !slices.ContainsFunc(ln.certs, func(e *certEntry) bool { return e.def }) && len(ln.certs) > 1 && !ln.tls.refuseUnknown {
			ln.certs[0].def = true
		}
		if ln.tls.refuseUnknown {
			for _, e := range ln.certs {
				e.def = false
			}
		}
		t.tlsSettings(ln, servers)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// certPath resolves a certificate path as nginx does (relative paths
// against the configuration prefix) and warns when the file is missing.
func (t *translator) certPath(p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(t.opt.ConfigDir, p)
	}
	if !t.opt.Exists(p) {
		t.warnings = appendOnce(t.warnings, fmt.Sprintf("%s does not exist on this machine; `sturdy check` loads certificates and will fail until it does", p))
	}
	return p
}

// tlsSettings carries ssl_protocols, ssl_ciphers and client certificates
// over. nginx set them per server; sturdy sets them per listener, so the
// default server's are used and other servers' differences listed.
func (t *translator) tlsSettings(ln *listener, servers []*nginx.Server) {
	if len(servers) == 0 {
		return
	}
	srv := servers[0]
	before := len(ln.comments)
	if d := srv.Get1("ssl_protocols"); d != nil {
		t.use(d)
		ln.tls.minVersion = t.protocols(ln, d)
	}
	if d := srv.Get1("ssl_ciphers"); d != nil {
		t.use(d)
		ln.tls.ciphers = t.ciphers(ln, d)
		if ln.tls.minVersion == "1.3" {
			ln.tls.ciphers = nil
		}
	}
	for _, c := range ln.comments[before:] {
		for _, o := range servers {
			t.sniSettings[o] = append(t.sniSettings[o], note{c, NeedTLSSettings})
		}
	}
	for _, o := range servers[1:] {
		for _, name := range []string{"ssl_protocols", "ssl_ciphers"} {
			a, b := srv.Get1(name), o.Get1(name)
			if b != nil && (a == nil || !slices.Equal(a.Args, b.Args)) {
				t.use(b)
				t.sniSettings[o] = append(t.sniSettings[o], note{fmt.Sprintf("%s %s (%s): sturdy uses the default server's TLS settings for every name on %s", name, strings.Join(b.Args, " "), b.Pos(), ln.listen), NeedTLSSettings})
			}
		}
	}
	t.clientCerts(ln, servers)
}

// protocols maps ssl_protocols onto min_version: sturdy speaks TLS 1.2
// and 1.3.
func (t *translator) protocols(ln *listener, d *nginx.Directive) string {
	has := map[string]bool{}
	for _, a := range d.Args {
		has[a] = true
	}
	var old []string
	for _, p := range []string{"SSLv2", "SSLv3", "TLSv1", "TLSv1.1"} {
		if has[p] {
			old = append(old, p)
		}
	}
	if len(old) > 0 {
		ln.comments = append(ln.comments, fmt.Sprintf("ssl_protocols %s (%s): sturdy never speaks %s; clients that only do those are refused", strings.Join(d.Args, " "), d.Pos(), strings.Join(old, ", ")))
	}
	switch {
	case has["TLSv1.3"] && !has["TLSv1.2"] && len(old) == 0:
		return "1.3"
	case !has["TLSv1.3"]:
		ln.comments = append(ln.comments, fmt.Sprintf("ssl_protocols %s (%s) left TLS 1.3 out; sturdy always offers it", strings.Join(d.Args, " "), d.Pos()))
	}
	return ""
}

// opensslSuites maps OpenSSL's names for the TLS 1.2 suites Go offers.
var opensslSuites = map[string]string{
	"ECDHE-ECDSA-AES128-GCM-SHA256": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
	"ECDHE-RSA-AES128-GCM-SHA256":   "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"ECDHE-ECDSA-AES256-GCM-SHA384": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
	"ECDHE-RSA-AES256-GCM-SHA384":   "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"ECDHE-ECDSA-CHACHA20-POLY1305": "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
	"ECDHE-RSA-CHACHA20-POLY1305":   "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
	"ECDHE-ECDSA-AES128-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
	"ECDHE-RSA-AES128-SHA":          "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
	"ECDHE-ECDSA-AES256-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
	"ECDHE-RSA-AES256-SHA":          "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
}

// ciphers maps an ssl_ciphers list of suite names onto cipher_suites;
// OpenSSL expressions (HIGH:!aNULL, ECDHE+AESGCM) keep Go's secure list.
func (t *translator) ciphers(ln *listener, d *nginx.Directive) []string {
	var out, left []string
	for _, s := range strings.FieldsFunc(d.Arg(0), func(r rune) bool { return r == ':' || r == ',' || r == ' ' }) {
		if strings.HasPrefix(s, "!") || strings.HasPrefix(s, "-") {
			continue // exclusions: Go offers none of the insecure suites anyway
		}
		name, ok := opensslSuites[s]
		if !ok {
			if _, err := config.CipherSuite(s); err == nil {
				name, ok = s, true
			}
		}
		if !ok {
			left = append(left, s)
			continue
		}
		out = appendOnce(out, name)
	}
	switch {
	case len(left) > 0 && len(out) == 0:
		ln.comments = append(ln.comments, fmt.Sprintf("ssl_ciphers %s (%s) is an OpenSSL selection; sturdy offers Go's secure TLS 1.2 suites (ECDHE with AES-GCM or ChaCha20, then AES-CBC), and TLS 1.3's", d.Arg(0), d.Pos()))
		return nil
	case len(left) > 0:
		ln.comments = append(ln.comments, fmt.Sprintf("ssl_ciphers (%s): %s have no secure Go suite and were left out", d.Pos(), strings.Join(left, ", ")))
	}
	if !slices.Contains(out, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") && !slices.Contains(out, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256") {
		ln.comments = append(ln.comments, fmt.Sprintf("ssl_ciphers (%s) has no ECDHE AES-128-GCM suite, which HTTP/2 requires; sturdy offers Go's secure list instead", d.Pos()))
		return nil
	}
	return out
}

// clientCerts carries ssl_verify_client and ssl_client_certificate over:
// the listener's client_auth, and where only some servers of the listener
// required a certificate, their routes' client_cert: required.
func (t *translator) clientCerts(ln *listener, servers []*nginx.Server) {
	type want struct {
		mode, ca string
		d        *nginx.Directive
	}
	wants := map[*nginx.Server]want{}
	for _, srv := range servers {
		d := srv.Get1("ssl_verify_client")
		if d == nil || d.Arg(0) == "off" {
			continue
		}
		t.use(d)
		w := want{d: d}
		switch d.Arg(0) {
		case "on":
			w.mode = config.ClientAuthRequireAndVerify
		case "optional":
			w.mode = config.ClientAuthVerifyIfGiven
		case "optional_no_ca":
			w.mode = config.ClientAuthRequest
		}
		if w.mode != config.ClientAuthRequest {
			ca := srv.Get1("ssl_client_certificate")
			if ca == nil {
				ca = srv.Get1("ssl_trusted_certificate")
			}
			if ca == nil {
				t.clientCert[srv] = "nginx verified client certificates without a CA sturdy can name"
				continue
			}
			t.use(ca)
			w.ca = t.certPath(ca.Arg(0))
		}
		if x := srv.Get1("ssl_verify_depth"); x != nil {
			t.use(x)
		}
		wants[srv] = w
	}
	if len(wants) == 0 {
		return
	}
	same := len(wants) == len(servers)
	var first want
	for _, srv := range servers {
		if w, ok := wants[srv]; ok {
			if first.d == nil {
				first = w
			}
			same = same && w.mode == first.mode && w.ca == first.ca
		}
	}
	if same {
		ln.tls.clientAuth = config.ClientAuth{Mode: first.mode, CA: first.ca}
		ln.comments = append(ln.comments, fmt.Sprintf("ssl_verify_client %s (%s)", first.d.Arg(0), first.d.Pos()))
		return
	}
	// Servers differ: verify when given against the one CA, and require a
	// certificate on the routes of the servers that did.
	var ca string
	for _, srv := range servers {
		w, ok := wants[srv]
		switch {
		case !ok:
		case w.ca == "":
			t.clientCert[srv] = fmt.Sprintf("nginx asked for client certificates without verifying them (%s) on a listener where other servers did not", w.d.Pos())
		case ca == "" || ca == w.ca:
			ca = w.ca
			if w.mode == config.ClientAuthRequireAndVerify {
				t.clientCert[srv] = config.ClientCertRequired
			}
		default:
			t.clientCert[srv] = fmt.Sprintf("nginx verified client certificates against %s (%s), and another server on this listener against %s; sturdy has one CA per listener", w.ca, w.d.Pos(), ca)
		}
	}
	if ca != "" {
		ln.tls.clientAuth = config.ClientAuth{Mode: config.ClientAuthVerifyIfGiven, CA: ca}
		ln.comments = append(ln.comments, "client certificates: verified when given (servers on this listener differed in nginx); the routes of servers with ssl_verify_client on require one")
	}
}

// hstsListeners sets a TLS listener's hsts when every route on it came
// from a block that sent the same Strict-Transport-Security; otherwise the
// header is a listed difference of the routes that sent it.
func (t *translator) hstsListeners() {
	for _, ln := range t.listenersOut {
		if !ln.ssl {
			continue
		}
		var value string
		all, any := true, false
		for _, r := range t.routesOut {
			if !slices.Contains(r.listeners, ln.name) || r.pool != nil && r.pool.refusal {
				continue
			}
			switch {
			case r.hsts == nil:
				all = false
			case value == "" || value == r.hsts.Arg(1):
				value, any = r.hsts.Arg(1), true
			default:
				all = false
			}
		}
		if !any {
			continue
		}
		h, ok := parseHSTS(value)
		if all && ok {
			ln.tls.hsts = h
			ln.comments = append(ln.comments, fmt.Sprintf("Strict-Transport-Security %q: every server on this listener added it (add_header)", value))
			continue
		}
		for _, r := range t.routesOut {
			if r.hsts != nil && slices.Contains(r.listeners, ln.name) && r.block != nil {
				addReason(r.block, NeedResponseHeaders, fmt.Sprintf("nginx added Strict-Transport-Security: %s (%s); sturdy sends it only when every server of a listener does", r.hsts.Arg(1), r.hsts.Pos()))
			}
		}
	}
}

// parseHSTS reads "max-age=N; includeSubDomains; preload".
func parseHSTS(v string) (*config.HSTS, bool) {
	h := &config.HSTS{}
	for _, p := range strings.Split(v, ";") {
		p = strings.TrimSpace(p)
		switch k, val, _ := strings.Cut(p, "="); strings.ToLower(k) {
		case "max-age":
			n, err := strconv.ParseInt(strings.Trim(val, `"`), 10, 64)
			if err != nil || n < 1 {
				return nil, false
			}
			h.MaxAge = config.Duration(time.Duration(n) * time.Second)
		case "includesubdomains":
			h.IncludeSubdomains = true
		case "preload":
			h.Preload = true
		case "":
		default:
			return nil, false
		}
	}
	if h.MaxAge == 0 || h.Preload && (!h.IncludeSubdomains || h.MaxAge.D() < config.DefaultHSTSMaxAge) {
		return nil, false
	}
	return h, true
}

// addReason adds a difference to a block after its routes were made.
func addReason(b *Block, need Need, reason string) {
	r := reason
	if need != "" {
		r += " (needs " + string(need) + ")"
		if !slices.Contains(b.Needs, need) {
			b.Needs = append(b.Needs, need)
		}
	}
	if !slices.Contains(b.Reasons, r) {
		b.Reasons = append(b.Reasons, r)
	}
	if b.Status == Translated {
		b.Status = TranslatedDiffers
	}
}
