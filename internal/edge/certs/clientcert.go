package certs

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// The headers that carry a client certificate's identity to backends.
// They are removed from every request a client sends, on every listener,
// and set only by sturdy, so that a backend can believe them.
const (
	// HeaderSubject is the verified certificate's subject (RFC 2253, like
	// "CN=alice,OU=ops,O=Example"); set only when the chain was verified.
	HeaderSubject = "X-Client-Cert-Subject"
	// HeaderFingerprint is the lowercase hex SHA-256 of the leaf (DER),
	// set whenever the client showed a certificate.
	HeaderFingerprint = "X-Client-Cert-Fingerprint"
	// HeaderVerified is "true" when the certificate chains to the
	// listener's client_auth.ca, "false" when it was shown but not checked
	// (modes request and require).
	HeaderVerified = "X-Client-Cert-Verified"
)

// Requirement is what a route asks of the client's certificate.
type Requirement uint8

// Requirements.
const (
	// NoRequirement lets every request through.
	NoRequirement Requirement = iota
	// RequireVerified needs a certificate verified against the listener's
	// client_auth.ca.
	RequireVerified
)

// The reasons Check gives. Answer them with 403 (the connection is fine,
// the client is not allowed), and say what is needed.
var (
	ErrNoClientCert = errors.New("this page requires a client certificate, and the connection presented none")
	ErrUnverified   = errors.New("this page requires a client certificate issued by the authority this listener trusts; the one presented was not verified")
)

// RequirementOf returns a route's requirement (routes[].client_cert).
func RequirementOf(r config.Route) Requirement {
	if r.ClientCert == config.ClientCertRequired {
		return RequireVerified
	}
	return NoRequirement
}

// Check reports why r does not meet the requirement, or nil. A route
// without a requirement pays one comparison.
func (q Requirement) Check(r *http.Request) error {
	if q == NoRequirement {
		return nil
	}
	cs := r.TLS
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return ErrNoClientCert
	}
	if len(cs.VerifiedChains) == 0 {
		return ErrUnverified
	}
	return nil
}

// identity is a connection's certificate identity as header values,
// computed once per connection and shared by its requests; never modified.
type identity struct {
	once        sync.Once
	subject     []string // nil unless verified
	fingerprint []string
	verified    []string
}

type identityKey struct{}

var (
	verifiedTrue  = []string{"true"}
	verifiedFalse = []string{"false"}
)

// ConnContext is for http.Server.ConnContext on listeners that ask for
// client certificates: it keeps one identity per connection, so that the
// hash and the subject are computed once, not per request.
func ConnContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, identityKey{}, &identity{})
}

// IdentityHeader reports whether header k (canonical form) is one of the
// identity headers: copying a request's header upstream must skip them,
// so that a client can never send its own.
func IdentityHeader(k string) bool {
	return len(k) > len(identityPrefix) && k[0] == 'X' && k[:len(identityPrefix)] == identityPrefix
}

const identityPrefix = "X-Client-Cert-"

// SetIdentity removes the identity headers from out (the header going to
// the backend, built from r's) and sets them from r's client certificate,
// if any.
func SetIdentity(out http.Header, r *http.Request) {
	delete(out, HeaderSubject)
	delete(out, HeaderFingerprint)
	delete(out, HeaderVerified)
	AddIdentity(out, r)
}

// AddIdentity sets the identity headers on out from r's client
// certificate, if any: for a header built without the identity headers a
// client sent (see IdentityHeader), where SetIdentity's deletes would be
// wasted work on every request.
func AddIdentity(out http.Header, r *http.Request) {
	cs := r.TLS
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return
	}
	id, _ := r.Context().Value(identityKey{}).(*identity)
	if id == nil {
		id = &identity{}
	}
	id.once.Do(func() { id.fill(cs) })
	if id.subject != nil {
		out[HeaderSubject] = id.subject
	}
	out[HeaderFingerprint] = id.fingerprint
	out[HeaderVerified] = id.verified
}

func (id *identity) fill(cs *tls.ConnectionState) {
	leaf := cs.PeerCertificates[0]
	sum := sha256.Sum256(leaf.Raw)
	id.fingerprint = []string{hex.EncodeToString(sum[:])}
	id.verified = verifiedFalse
	if len(cs.VerifiedChains) > 0 {
		id.verified = verifiedTrue
		id.subject = []string{headerSafe(leaf.Subject.String())}
	}
}

// headerSafe escapes the control bytes a subject may hold (a CA can put
// anything in a name), which would otherwise end the header line.
func headerSafe(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			b.WriteString(`\x`)
			b.WriteString(hex.EncodeToString([]byte{c}))
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}
