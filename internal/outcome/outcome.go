// Package outcome names what happened to one upstream attempt. Each attempt
// is classified once, where it happens, and the class travels with the
// request to metrics, the access log, events and the client's error body.
package outcome

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// Class is the outcome of one upstream attempt.
type Class uint8

// Outcome classes. The order is stable: metrics and tests index by it.
const (
	OK Class = iota
	ConnectRefused
	ConnectTimeout
	DNSError
	TLSError
	Reset
	EOFBeforeResponse
	ResponseTimeout
	BadResponse
	Status5xx
	ClientCancel
	// BodyError is a late failure: the response headers arrived but the body
	// broke off. It is counted but weighs less than a failure before headers.
	BodyError
	// ConnectError is any other failure to connect (no route to host, ...).
	ConnectError
	// StreamRefused is a request the backend refused before processing it:
	// an HTTP/2 stream above a GOAWAY's last stream ID, or one reset with
	// REFUSED_STREAM (RFC 9113 section 8.7). Nothing was sent, as far as
	// the backend's application is concerned: safe to retry.
	StreamRefused
	// ClientBodyError is an attempt abandoned because the client's own
	// request body broke: bad chunking, a length that lies, a client that
	// stopped sending. The client's fault, never the host's.
	ClientBodyError
	// LocalError is sturdy running out of its own resources while trying
	// the host: file descriptors, socket buffers, memory, local ports.
	// sturdy's fault, never the host's.
	LocalError
	// StaleConnection is a request that met the close of a kept-alive
	// connection: the connection was reused, the backend closed or reset
	// it before any byte of the response, and the request could not be
	// sent again (not idempotent, or its body gone). Either the backend's
	// close never acknowledged the request, or the backend closed with
	// the request unread: racing the request, not failing on it. The
	// connection's doing, never the host's.
	StaleConnection
	NumClasses
)

// All lists every class in order.
func All() []Class {
	c := make([]Class, NumClasses)
	for i := range c {
		c[i] = Class(i)
	}
	return c
}

var names = [NumClasses]string{
	OK:                "ok",
	ConnectRefused:    "connect_refused",
	ConnectTimeout:    "connect_timeout",
	DNSError:          "dns_error",
	TLSError:          "tls_error",
	Reset:             "reset",
	EOFBeforeResponse: "eof_before_response",
	ResponseTimeout:   "response_timeout",
	BadResponse:       "bad_response",
	Status5xx:         "status_5xx",
	ClientCancel:      "client_cancel",
	BodyError:         "body_error",
	ConnectError:      "connect_error",
	StreamRefused:     "stream_refused",
	ClientBodyError:   "client_body_error",
	LocalError:        "local_error",
	StaleConnection:   "stale_connection",
}

func (c Class) String() string {
	if c < NumClasses {
		return names[c]
	}
	return "unknown"
}

// Sent reports whether an attempt with this outcome reached the backend,
// i.e. whether some of the request may have been sent. Failures that were
// not sent are evidence against the host (or the path to it) alone, and
// always safe to retry elsewhere.
func (c Class) Sent() bool {
	switch c {
	case ConnectRefused, ConnectTimeout, DNSError, TLSError, ConnectError, StreamRefused, LocalError:
		return false
	}
	return true
}

// Failure reports whether the class counts as a failed attempt of the
// host's: not a success, and not caused by the client or by sturdy itself.
func (c Class) Failure() bool { return c != OK && !c.NotHosts() }

// NotHosts reports whether an attempt with this outcome says nothing about
// the host: the client went away or broke its own request, or sturdy ran
// out of its own resources. Such attempts are counted, never held against
// the host, and never a reason to try another.
func (c Class) NotHosts() bool {
	return c == ClientCancel || c == ClientBodyError || c == LocalError || c == StaleConnection
}

// ErrNotProcessed is wrapped by a client's error when the backend is
// known not to have processed the request (an HTTP/2 GOAWAY or
// REFUSED_STREAM): Classify makes it StreamRefused.
var ErrNotProcessed = errors.New("the backend did not process the request")

// ErrStaleConnection is wrapped by a client's error when a kept-alive
// connection closed under a request that could not be sent again:
// Classify makes it StaleConnection.
var ErrStaleConnection = errors.New("the kept-alive connection closed as the request went out")

// Classify maps a transport error to a class. clientGone reports whether the
// client's own context ended (the client cancelled or went away).
func Classify(err error, clientGone bool) Class {
	if clientGone {
		return ClientCancel
	}
	if errors.Is(err, ErrNotProcessed) {
		return StreamRefused
	}
	if errors.Is(err, ErrStaleConnection) {
		return StaleConnection
	}
	if IsLocalExhaustion(err) {
		return LocalError
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return DNSError
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			return ConnectRefused
		case op.Timeout():
			return ConnectTimeout
		}
		return ConnectError
	}
	if isTLS(err) {
		return TLSError
	}
	switch {
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return Reset
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return EOFBeforeResponse
	case errors.Is(err, context.DeadlineExceeded):
		return ResponseTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ResponseTimeout
	}
	// net/http reports "server closed connection" / "malformed HTTP
	// response" without typed errors; anything else after sending is a
	// response we could not use.
	if isClosedBeforeResponse(err) {
		return EOFBeforeResponse
	}
	return BadResponse
}

// IsLocalExhaustion reports whether err is sturdy's own machine running out
// of something: file descriptors (EMFILE, ENFILE), socket buffers
// (ENOBUFS), kernel memory (ENOMEM) or local ports for outgoing
// connections (EADDRNOTAVAIL). No backend can cause these.
func IsLocalExhaustion(err error) bool {
	return LocalResource(err) != ""
}

// LocalResource names the resource err says sturdy ran out of
// ("file_descriptors", "socket_buffers", "memory", "local_ports"), or ""
// when err is not local exhaustion. The names are a fixed set, fit for
// metric labels.
func LocalResource(err error) string {
	if err == nil {
		return ""
	}
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return ""
	}
	switch errno {
	case syscall.EMFILE, syscall.ENFILE:
		return "file_descriptors"
	case syscall.ENOBUFS:
		return "socket_buffers"
	case syscall.ENOMEM:
		return "memory"
	case syscall.EADDRNOTAVAIL:
		return "local_ports"
	}
	return ""
}

// LocalResources lists every name LocalResource returns.
func LocalResources() []string {
	return []string{"file_descriptors", "socket_buffers", "memory", "local_ports"}
}

func isTLS(err error) bool {
	var rh tls.RecordHeaderError
	var ae tls.AlertError
	var ce *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &rh) || errors.As(err, &ae) || errors.As(err, &ce) ||
		errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci)
}

func isClosedBeforeResponse(err error) bool {
	s := err.Error()
	return strings.Contains(s, "server closed") || strings.Contains(s, "closed connection") || strings.Contains(s, "connection closed")
}
