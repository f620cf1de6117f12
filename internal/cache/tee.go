package cache

import (
	"io"
	"net/http"
	"time"
)

// tee is the body of an origin's response on its way to the client. The
// caller streams it; the tee counts a body that breaks as an origin error
// and, when the response may be stored, copies it into a buffer of at most
// MaxObjectBytes and stores it once it has ended complete. It is read and
// closed by one goroutine, the caller's.
type tee struct {
	rc io.ReadCloser // the body Fetch returned
	c  *Cache
	r  *http.Request // the client's request
	rs *routeState

	// Set when the body may be stored.
	keep                      bool // still headed for the store
	buf                       []byte
	resp                      *http.Response
	key, primary              string
	stale                     *entry  // the copy this response supersedes, if any
	f                         *flight // the flight this request leads; the tee publishes it
	upstreamCS                []string
	requestTime, responseTime time.Time

	tooLarge bool // it was headed for the store but proved too large
	ended    bool // it reached its end, broke or was closed: the outcome is settled
	stored   bool
}

func (t *tee) Read(p []byte) (int, error) {
	n, err := t.rc.Read(p)
	if t.keep && n > 0 {
		if int64(len(t.buf)+n) > t.c.maxObject {
			// Too large after all: stop copying, and let the followers ask
			// for themselves now rather than after the whole stream.
			t.keep, t.buf, t.tooLarge = false, nil, true
			t.c.finish(t.key, t.f, flightResult{})
		} else {
			t.buf = append(t.buf, p[:n]...)
		}
	}
	if err != nil && !t.ended {
		t.ended = true
		if err == io.EOF {
			t.complete()
		} else {
			t.broken()
		}
	}
	return n, err
}

// Close ends the body. A body closed before its end stores nothing.
func (t *tee) Close() error {
	if !t.ended {
		t.ended = true
		t.keep, t.buf = false, nil
		t.c.finish(t.key, t.f, flightResult{})
	}
	return t.rc.Close()
}

// Unwrap returns the body Fetch returned.
func (t *tee) Unwrap() io.ReadCloser { return t.rc }

func (t *tee) complete() {
	if !t.keep {
		if t.tooLarge && t.stale != nil {
			t.c.store.invalidate(t.key) // superseded, and the new body did not fit
		}
		return
	}
	t.keep = false
	if len(t.resp.Trailer) > 0 {
		// Trailers came that the header did not announce; the store keeps
		// none, so it keeps nothing.
		if t.stale != nil {
			t.c.store.invalidate(t.key)
		}
		t.c.finish(t.key, t.f, flightResult{})
		return
	}
	e := t.c.storeOrigin(t.r, t.rs, t.primary, t.resp, t.buf, t.upstreamCS, t.requestTime, t.responseTime)
	t.buf = nil
	t.stored = true
	t.c.finish(t.key, t.f, flightResult{ent: e, status: StatusMiss, originStatus: t.resp.StatusCode})
}

// broken counts a body that failed after its header: the origin's failure,
// unless the client's request ended first. Nothing is stored.
func (t *tee) broken() {
	if t.r.Context().Err() == nil {
		t.rs.originErrors.Add(1)
		t.rs.episodeFailure()
	}
	t.keep, t.buf = false, nil
	t.c.finish(t.key, t.f, flightResult{})
}
