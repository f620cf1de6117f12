package proxy

import (
	"crypto/tls"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/wire/h1client"
)

// upstreamTimes are the last attempt's times, for the access log: only
// measured when its format asks for them.
type upstreamTimes struct {
	begin time.Time
	hdr   time.Duration // from the attempt's start to the response header
	// dial and connect are written by the client's trace, which
	// http.Transport may call from its own goroutine.
	dial    atomic.Int64 // UnixNano when a new connection was started; 0 when one was reused
	connect atomic.Int64 // the new connection's dial (and TLS handshake), ns
}

func (t *upstreamTimes) start() {
	t.begin, t.hdr = time.Now(), 0
	t.dial.Store(0)
	t.connect.Store(0)
}

func (t *upstreamTimes) header() { t.hdr = time.Since(t.begin) }

func (t *upstreamTimes) connected() {
	if d := t.dial.Load(); d != 0 {
		t.connect.Store(time.Now().UnixNano() - d)
	}
}

// traced returns out with a trace that times new connections.
func (t *upstreamTimes) traced(out *http.Request) *http.Request {
	tr := &httptrace.ClientTrace{
		ConnectStart:     func(string, string) { t.dial.Store(time.Now().UnixNano()) },
		ConnectDone:      func(string, string, error) { t.connected() },
		TLSHandshakeDone: func(tls.ConnectionState, error) { t.connected() },
	}
	ctx := out.Context()
	return out.WithContext(h1client.KeepAfterFunc(httptrace.WithClientTrace(ctx, tr), ctx))
}
