package proxy

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/sturdyproxy/sturdy/internal/access"
	"github.com/sturdyproxy/sturdy/internal/edge"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// serveCached answers through the route's cache. The cache asks the origin
// through fetch (the same attempts, fallback pool included) and returns the
// response to send, from its store or the origin's; it is streamed like
// any other. What the cache cannot answer, the chain answers: a stale copy
// within the route's bound when the pool is empty, then the sorry page.
func (f *forwarder) serveCached() {
	rt := f.rt
	// A fetcher of its own, so that the forwarder (on the request's stack)
	// does not escape to the heap for every request of every route.
	cf := &cacheFetcher{h: f.h, snap: f.snap, rt: rt, clientKey: f.clientKey, clientBit: f.clientBit, admission: f.admission, admitted: f.admitted}
	r := f.r
	if rt.Total > 0 {
		r = r.WithContext(f.ctx) // the route's overall deadline reaches the origin fetch
	}
	resp, res := rt.Cache.Serve(r, rt.CachePolicy, cf.fetch)
	f.cacheStatus = res.Status
	if resp != nil {
		if res.Stale {
			f.answered(AnswerStale)
			if res.OriginError {
				rt.Pool.EpisodeAnswer(health.ByStale)
			}
		}
		f.status = f.streamCached(resp)
		return
	}
	var fe *fetchError
	if !errors.As(res.OriginErr, &fe) {
		// The client left while waiting for another request's fetch.
		f.status = 499
		return
	}
	f.class, f.sameTwice, f.attr, f.fault, f.bodyErr = fe.class, fe.sameTwice, fe.attr, fe.fault, fe.bodyErr
	if fe.fl == failNoHost {
		if resp := rt.Cache.ServeStale(r, rt.CachePolicy, "no backend available"); resp != nil {
			f.answered(AnswerStale)
			rt.Pool.EpisodeAnswer(health.ByStale)
			f.status = f.streamCached(resp)
			return
		}
	}
	f.status = f.answer(fe.fl)
}

// streamCached streams a response the cache returned. When it is a
// backend's, its body leads (through the cache's tee) to the fetch that got
// it: the request is recorded as that fetch's, and a body that breaks is
// charged to the host that sent it. The host's in-flight slot is released
// when the body is closed.
func (f *forwarder) streamCached(resp *http.Response) int {
	if b := originBody(resp.Body); b != nil {
		fw := b.fw
		f.pool, f.host, f.class, f.attr, f.tried = fw.pool, b.host, fw.class, fw.attr, fw.tried
	}
	return f.stream(resp, f.pool, f.host)
}

// originBody finds the releasingBody under the wrappers a cache put around
// a backend's body, or nil for a body that came from the store.
func originBody(b io.ReadCloser) *releasingBody {
	for {
		switch v := b.(type) {
		case *releasingBody:
			return v
		case interface{ Unwrap() io.ReadCloser }:
			b = v.Unwrap()
		default:
			return nil
		}
	}
}

// fetchError carries an exchange's failure through the cache.
type fetchError struct {
	fl        failure
	class     outcome.Class
	sameTwice bool
	attr      health.Attribution
	fault     edge.Reason // with failClientBody
	bodyErr   error
}

func (e *fetchError) Error() string { return "no response from the backends: " + e.class.String() }

// cacheFetcher is the cache's way to the origin.
type cacheFetcher struct {
	h         *Handler
	snap      *Snapshot
	rt        *Route
	clientKey string
	clientBit uint64
	admission access.Admission
	admitted  bool
}

// fetch runs the attempts for a request the cache built. The cache may call
// it after the client's request is over (a background revalidation), so
// each call gets a forwarder of its own. Via is added when the response is
// streamed, not here, so that the store does not keep it.
func (c *cacheFetcher) fetch(r *http.Request) (*http.Response, error) {
	fw := &forwarder{h: c.h, snap: c.snap, rt: c.rt, r: r, now: time.Now(), ctx: r.Context(),
		clientKey: c.clientKey, clientBit: c.clientBit, admission: c.admission, admitted: c.admitted}
	resp, host, fl := fw.fetch()
	if resp == nil {
		fw.closeSpool()
		return nil, &fetchError{fl: fl, class: fw.class, sameTwice: fw.sameTwice, attr: fw.attr, fault: fw.fault, bodyErr: fw.bodyErr}
	}
	removeHopHeaders(resp.Header)
	resp.Body = &releasingBody{ReadCloser: resp.Body, fw: fw, host: host}
	return resp, nil
}

// releasingBody is a backend's body on its way through the cache: it
// releases the host's in-flight slot when the body is closed, and keeps the
// fetch that got it, for the request's record and the host's accounting.
type releasingBody struct {
	io.ReadCloser
	fw   *forwarder
	host *health.Host
	once sync.Once
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() {
		b.host.Release()
		if b.fw != nil { // a mirror's copy has none
			b.fw.closeSpool()
		}
	})
	return err
}
