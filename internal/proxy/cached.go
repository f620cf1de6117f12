package proxy

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/sturdyproxy/sturdy/internal/access"

	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// serveCached answers through the route's cache. The cache asks the origin
// through fetch (the same attempts, fallback pool included) and answers
// from its store when it may; what it cannot answer, the chain answers: a
// stale copy within the route's bound when the pool is empty, then the
// sorry page.
func (f *forwarder) serveCached() {
	rt := f.rt
	sw := &statusWriter{ResponseWriter: f.w}
	// A fetcher of its own, so that the forwarder (on the request's stack)
	// does not escape to the heap for every request of every route.
	cf := &cacheFetcher{h: f.h, snap: f.snap, rt: rt, clientKey: f.clientKey, clientBit: f.clientBit, admission: f.admission}
	r := f.r
	if rt.Total > 0 {
		r = r.WithContext(f.ctx) // the route's overall deadline reaches the origin fetch
	}
	res := rt.Cache.Serve(sw, r, rt.CachePolicy, cf.fetch)
	f.cacheStatus = res.Status
	defer func() { f.bytes = sw.bytes }()
	if res.Written() {
		f.status = sw.status
		if res.Stale {
			f.answered(AnswerStale)
			if res.OriginError {
				rt.Pool.EpisodeAnswer(health.ByStale)
			}
		}
		return
	}
	var fe *fetchError
	if !errors.As(res.OriginErr, &fe) {
		// The client left while waiting for another request's fetch.
		f.status = 499
		return
	}
	f.class, f.sameTwice = fe.class, fe.sameTwice
	if fe.fl == failNoHost && rt.Cache.ServeStale(sw, r, rt.CachePolicy, "no backend available") {
		f.answered(AnswerStale)
		rt.Pool.EpisodeAnswer(health.ByStale)
		f.status = sw.status
		return
	}
	f.status = f.answer(fe.fl)
}

// fetchError carries an exchange's failure through the cache.
type fetchError struct {
	fl        failure
	class     outcome.Class
	sameTwice bool
}

func (e *fetchError) Error() string { return "no response from the backends: " + e.class.String() }

// cacheFetcher is the cache's way to the origin.
type cacheFetcher struct {
	h         *Handler
	snap      *Snapshot
	rt        *Route
	clientKey string
	clientBit uint64
	admission *access.Admission
}

// fetch runs the attempts for a request the cache built. The cache may call
// it after the client's request is over (a background revalidation), so
// each call gets a forwarder of its own.
func (c *cacheFetcher) fetch(r *http.Request) (*http.Response, error) {
	fw := &forwarder{h: c.h, snap: c.snap, rt: c.rt, r: r, now: time.Now(), ctx: r.Context(),
		clientKey: c.clientKey, clientBit: c.clientBit, admission: c.admission}
	resp, host, fl := fw.fetch()
	if resp == nil {
		return nil, &fetchError{fl: fl, class: fw.class, sameTwice: fw.sameTwice}
	}
	removeHopHeaders(resp.Header)
	resp.Header["Via"] = append(resp.Header["Via"], via[0])
	resp.Body = &releasingBody{ReadCloser: resp.Body, host: host}
	return resp, nil
}

// releasingBody releases the host's in-flight slot when the cache is done
// with the response body.
type releasingBody struct {
	io.ReadCloser
	host *health.Host
	once sync.Once
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.host.Release)
	return err
}

// statusWriter remembers the status written, for the route's counters.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the real writer (Flush, ...).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes flushes on for streamed answers.
func (w *statusWriter) Flush() {
	if fl, ok := w.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}
