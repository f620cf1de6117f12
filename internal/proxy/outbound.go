package proxy

// The outbound request: built once per request, its body settled (read
// whole when small enough, streamed otherwise) before any backend is
// asked; the attempts only change its URL and Host.

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/sturdyproxy/sturdy/internal/route/subst"
	"github.com/sturdyproxy/sturdy/internal/wire/h1client"
)

// outboundParts is what the outbound request points into.
type outboundParts struct {
	url  url.URL
	vals [outboundValues]string
}

// prepare builds the outbound request once; attempts only change its URL
// host. The outbound header map is new; the inbound one is never modified.
func (f *forwarder) prepare() failure {
	r := f.r
	g := f.rt.Routing
	if g != nil && g.RequestID != nil && f.reqID == "" {
		// A fetch the cache makes for a client's request carries its id.
		if f.reqID = requestIDFrom(f.ctx); f.reqID == "" {
			f.reqID = NewRequestID()
		}
	}
	// The URL and the header's values live as long as the request: one
	// allocation for both.
	parts := &outboundParts{url: url.URL{Scheme: "http", Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}}
	f.url = &parts.url
	if g != nil && g.Rewrite != nil {
		f.rewrite(g.Rewrite)
	}
	out := http.Request{
		Method:        r.Method,
		URL:           f.url,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        outboundHeader(r, f.h.TLS, f.peerTrusted(), f.snap.Trusted, f.snap.Untrusted, f.up, &parts.vals),
		ContentLength: r.ContentLength,
		Host:          r.Host,
	}
	f.identity(out.Header)
	if f.grpc != nil {
		f.grpcOutbound(out.Header)
	}
	if f.admitted {
		f.admission.Apply(out.Header) // the auth service's headers; Authorization dropped unless forwarded
	}
	if h := f.be.Host; h != nil && !h.UsesProxyHost() {
		out.Host = h.Expand(f.templateVars()) // $proxy_host is per attempt
	}
	var mirror *Mirror
	if g != nil {
		f.routeRequest(g, &out)
		if hr := f.be.Request; hr != nil {
			// The chosen backend's own rules, after the route's.
			var v *subst.Vars
			if hr.Dynamic() {
				v = f.templateVars()
			}
			hr.Apply(out.Header, v)
		}
		if g.Mirror != nil && g.Mirror.take() {
			mirror = g.Mirror
		}
	}
	hasBody := r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
	mirrorBody := mirror != nil && hasBody && r.ContentLength > 0 && r.ContentLength <= mirror.MaxBody
	if mirror != nil && hasBody && !mirrorBody {
		mirror.Stats.Skipped.Add(1)
		mirror = nil
	}
	if !hasBody {
		out.ContentLength = 0
		return f.prepared(&out, mirror)
	}
	cb := &clientBody{rc: r.Body}
	if len(r.Trailer) > 0 {
		cb.trailers = f.outboundTrailer(r.Trailer)
		out.Trailer = cb.trailers.out
	}
	if t := f.rt.BodyTimeout; t > 0 && f.dl != nil {
		cb.dl, cb.idle.timeout = f.dl, t
	}
	if f.conn != nil {
		cb.fc = f.conn.Framing
	}
	// Bodies up to the bound are read whole before any backend is chosen:
	// one that breaks is the client's, and no backend ever gets half a
	// request. An idempotent request's body is also kept for a replay.
	limit := f.rt.BufferRequest
	if isIdempotent(r.Method) && f.rt.BufferBody > limit {
		limit = f.rt.BufferBody
	}
	if mirrorBody && mirror.MaxBody > limit {
		limit = mirror.MaxBody
	}
	spooled := f.rt.Spool != nil && bufferable(r)
	if limit > 0 && (r.ContentLength <= limit || spooled) && bufferable(r) {
		size := r.ContentLength
		if size > limit {
			size = -1 // read the first limit bytes, then to disk
		}
		buf, more, err := readBody(cb, size, limit)
		switch {
		case err != nil:
			return f.bodyFailed(err)
		case more && spooled:
			if fl := f.spill(cb, buf); fl != failNone {
				return fl
			}
			out.Body, out.GetBody = f.spooled.Reader(), f.spooled.Replay
			out.ContentLength = f.spooled.Size()
			if len(r.Trailer) > 0 {
				out.ContentLength = -1 // chunked again, to carry the trailers
			} else {
				out.Trailer = nil
			}
			if mirror != nil {
				mirror.Stats.Skipped.Add(1)
				mirror = nil
			}
		case more:
			// Larger than the bound: what was read leads, the rest streams.
			f.body = cb
			out.Body, out.ContentLength = &prefixBody{prefix: buf, rest: cb}, -1
			if mirror != nil {
				mirror.Stats.Skipped.Add(1)
				mirror = nil
			}
		case len(buf) == 0:
			out.ContentLength, out.Trailer = 0, nil
		default:
			f.buffered = buf
			out.GetBody = replayOf(buf) // for the upstream's stale-connection retry
			out.ContentLength = int64(len(buf))
			if len(out.Trailer) > 0 {
				out.ContentLength = -1 // chunked again, to carry the trailers
			} else {
				out.Trailer = nil
			}
		}
	} else {
		f.body = cb
		out.Body = cb
	}
	return f.prepared(&out, mirror)
}

// prepared finishes the outbound request once its body is settled.
func (f *forwarder) prepared(out *http.Request, mirror *Mirror) failure {
	ctx := f.ctx
	if isIdempotent(out.Method) && f.body == nil && f.rt.Tries > 1 && len(f.backend().Pool.Hosts) > 1 {
		// A reused connection that turns out closed goes to another host
		// (exchange), not to the same one again: a host going down under
		// keep-alive load fails the resend too, and a request that kills
		// backends would reach one more.
		ctx, f.noResend = h1client.WithoutResend(ctx), true
	}
	f.out = out.WithContext(ctx)
	if f.times != nil {
		f.out = f.times.traced(f.out)
	}
	if mirror != nil {
		mirror.send(f.out, f.buffered)
	}
	return failNone
}

// replayOf gives the buffered body once more. It holds the bytes, not
// the forwarder: a method value of the forwarder would move every
// request's forwarder to the heap.
func replayOf(buf []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
}

// spill reads the rest of a body larger than the memory buffer, after
// head (what was read of it already), into a file of the route's spool.
// A body the spool has no room for, or a disk that fails, is sturdy's
// own limit (failSpool); a body that breaks is the client's.
func (f *forwarder) spill(cb *clientBody, head []byte) failure {
	file, err := f.rt.Spool.Create()
	if err != nil {
		f.spoolErr = err
		return failSpool
	}
	f.spooled = file
	if _, err := file.Write(head); err != nil {
		f.spoolErr = err
		return failSpool
	}
	buf := head[:cap(head)]
	for {
		n, rerr := cb.Read(buf)
		if n > 0 {
			if _, err := file.Write(buf[:n]); err != nil {
				f.spoolErr = err
				return failSpool
			}
		}
		if rerr == io.EOF {
			return failNone
		}
		if rerr != nil {
			return f.bodyFailed(rerr)
		}
	}
}

// closeSpool gives back the disk space of a body that waited there.
func (f *forwarder) closeSpool() {
	if f.spooled != nil {
		f.spooled.Close()
	}
}

// bodyFailed is a request body that broke while being read whole, before
// any backend was asked.
func (f *forwarder) bodyFailed(err error) failure {
	switch {
	case isBodyTooLarge(err):
		return failTooLarge
	case f.r.Context().Err() != nil && !clientBroke(err):
		// Gone, not broken (an HTTP/2 reset, ...).
		return failCancel
	}
	f.fault, f.bodyErr = bodyFault(err), err
	return failClientBody
}

func isBodyTooLarge(err error) bool {
	var e *http.MaxBytesError
	return errors.As(err, &e)
}
