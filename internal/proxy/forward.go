package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/pool"
)

// forwarder carries one request through its attempts. It lives on the
// stack of ServeHTTP.
type forwarder struct {
	h    *Handler
	snap *Snapshot
	rt   *Route
	w    http.ResponseWriter
	r    *http.Request

	body  *replayBody // nil when the request has no body
	tried pool.Tried
	url   url.URL
	out   *http.Request
}

func (f *forwarder) serve() {
	r, rt := f.r, f.rt
	ctx := r.Context()
	if rt.Total > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, rt.Total)
		defer cancel()
	}
	f.prepare(ctx)
	key := f.hashKey()

	var last outcome.Class
	for attempt := 0; attempt < rt.MaxTries; attempt++ {
		host := rt.Pool.Next(key, &f.tried)
		if host == nil {
			break
		}
		f.tried.Add(host)
		resp, class, err := f.attempt(host)
		if resp != nil {
			f.respond(host, resp)
			return
		}
		last = class
		if isBodyTooLarge(err) {
			writeEdgeError(f.w, http.StatusRequestEntityTooLarge, rt.Name, "the request body is larger than this route allows")
			return
		}
		if class == outcome.ClientCancel {
			// Nobody is listening; 499 is what the access log will say.
			return
		}
		if class.Sent() || (f.body != nil && f.body.started()) {
			// Some of the request may have reached the backend: sending it
			// again could apply it twice.
			break
		}
	}
	if f.tried.Len() == 0 {
		writeNoHost(f.w, rt.Name)
		return
	}
	writeUpstreamError(f.w, rt.Name, last)
}

// prepare builds the outbound request once; attempts only change its URL
// host. The outbound header map is new; the inbound one is never modified.
func (f *forwarder) prepare(ctx context.Context) {
	r := f.r
	f.url = url.URL{Scheme: "http", Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	out := http.Request{
		Method:        r.Method,
		URL:           &f.url,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        outboundHeader(r, f.h.TLS, f.snap.Trusted),
		ContentLength: r.ContentLength,
		Host:          r.Host,
		Trailer:       r.Trailer,
	}
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		f.body = &replayBody{rc: r.Body}
		out.Body = f.body
		out.GetBody = nil
	} else {
		out.ContentLength = 0
		out.Body = nil
	}
	f.out = out.WithContext(ctx)
}

func (f *forwarder) hashKey() uint64 {
	if f.rt.HashKind == "" {
		return 0
	}
	switch f.rt.HashKind {
	case "header":
		if v := f.r.Header.Get(f.rt.HashName); v != "" {
			return pool.HashString(v)
		}
	case "cookie":
		if c, err := f.r.Cookie(f.rt.HashName); err == nil && c.Value != "" {
			return pool.HashString(c.Value)
		}
	}
	ip, _ := clientAddr(f.r.RemoteAddr)
	return pool.HashString(ip.String())
}

// attempt sends the request to host. It returns the response, or nil, the
// class of the failure and the error.
func (f *forwarder) attempt(host *pool.Host) (*http.Response, outcome.Class, error) {
	f.url.Host = host.Addr
	host.Acquire()
	resp, err := f.rt.Upstream.RoundTrip(f.out)
	if err != nil {
		host.Release()
		return nil, outcome.Classify(err, f.r.Context().Err() != nil), err
	}
	return resp, outcome.OK, nil
}

// replayBody lets the request body be offered to a second host when the
// first attempt failed before reading any of it. http.Transport closes the
// body it is given even on failure, so Close is a no-op here; the server
// closes the real body when the handler returns.
type replayBody struct {
	rc   io.ReadCloser
	read int64
}

func (b *replayBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.read += int64(n)
	return n, err
}

func (b *replayBody) Close() error { return nil }

func (b *replayBody) started() bool { return b.read > 0 }

// errBodyTooLarge is what http.MaxBytesReader reports.
var errBodyTooLarge *http.MaxBytesError

func isBodyTooLarge(err error) bool { return errors.As(err, &errBodyTooLarge) }
