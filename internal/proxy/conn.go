package proxy

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/sturdyproxy/sturdy/internal/edge"
	"github.com/sturdyproxy/sturdy/internal/wire/framing"
)

// Conn is what the request path keeps per HTTP/1.x client connection,
// across its requests: the framing tracker of a plain-HTTP connection, and
// whether a write deadline is still armed from an earlier response.
// Handlers of one HTTP/1.x connection run one after the other, so the
// fields need no lock; HTTP/2 streams never use it.
type Conn struct {
	// Framing follows the connection's request framing; nil on TLS.
	Framing *framing.Conn
	// writeArmed is set while a send timeout's deadline may be armed on
	// the connection; the next request clears it before answering.
	writeArmed bool
}

type connKey struct{}

// ConnContext is for http.Server.ConnContext: every connection gets a
// Conn, with the framing tracker when c is one (see framing.Wrap).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	fc, _ := c.(*framing.Conn)
	return context.WithValue(ctx, connKey{}, &Conn{Framing: fc})
}

func connFrom(r *http.Request) *Conn {
	if r.ProtoMajor != 1 {
		return nil
	}
	c, _ := r.Context().Value(connKey{}).(*Conn)
	return c
}

// deadliner is what net/http's response writers (HTTP/1 and HTTP/2) offer
// to bound the next read of the request body and write of the response.
type deadliner interface {
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

// idleDeadline arms a deadline before each read or write of a transfer,
// so that a transfer that makes no progress for timeout ends, however long
// a moving one takes. It re-arms at most every timeout/16: a stall ends
// between 15/16 of timeout and timeout after the last progress.
type idleDeadline struct {
	timeout time.Duration
	armed   time.Time
}

// expired reports whether the deadline armed last has passed at now.
func (d *idleDeadline) expired(now time.Time) bool {
	return !d.armed.IsZero() && !now.Before(d.armed.Add(d.timeout))
}

// due returns the deadline to arm now, or the zero time when the one armed
// is recent enough.
func (d *idleDeadline) due() time.Time {
	now := time.Now()
	if !d.armed.IsZero() && now.Sub(d.armed) < d.timeout>>4 {
		return time.Time{}
	}
	d.armed = now
	return now.Add(d.timeout)
}

// checkConn applies what the connection knows before the request is
// answered: a request whose framing is ambiguous is refused (and the
// connection closed), a deadline left armed by the previous response is
// cleared. It reports whether the request may go on, and returns the
// connection's state (nil on HTTP/2).
func (h *Handler) checkConn(w http.ResponseWriter, r *http.Request, snap *Snapshot) (*Conn, bool) {
	c := connFrom(r)
	if c == nil {
		if r.ProtoMajor == 1 && isChunked(r) {
			// Nothing follows this connection's framing (TLS: net/http
			// decrypts it, so nothing can), and net/http drops a
			// Content-Length it finds next to chunked without telling. Never
			// keep such a connection: what the client sent after the body
			// could be read as another request (RFC 9112 6.1).
			closeAfter(w, r)
		}
		return nil, true
	}
	if c.writeArmed {
		if dl, ok := w.(deadliner); ok {
			dl.SetWriteDeadline(time.Time{})
		}
		c.writeArmed = false
	}
	if c.Framing == nil {
		if isChunked(r) {
			closeAfter(w, r)
		}
		return c, true
	}
	switch v, why := c.Framing.Check(); v {
	case framing.Ambiguous:
		snap.Edge.C.Add(edge.FaultFraming)
		snap.Edge.C.Answered(http.StatusBadRequest)
		closeAfter(w, r)
		writeText(w, http.StatusBadRequest, "400 Bad Request: the request's framing is ambiguous ("+why+"); it was refused and the connection closed.\n")
		return c, false
	case framing.Unfollowed:
		closeAfter(w, r)
	}
	return c, true
}

func isChunked(r *http.Request) bool {
	return len(r.TransferEncoding) > 0
}

var connClose = []string{"close"}

// closeAfter closes an HTTP/1.x client connection after this answer:
// what follows a broken request on it cannot be trusted to be where the
// next one begins. An HTTP/2 or HTTP/3 stream's framing is its own, so a
// bad stream is refused alone: net/http's HTTP/2 server would make the
// field a GOAWAY for every stream of the connection, and on HTTP/3 it is
// a connection-specific field that makes the answer malformed.
func closeAfter(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 {
		w.Header()["Connection"] = connClose
	}
}
