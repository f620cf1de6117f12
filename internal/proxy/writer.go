package proxy

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/sturdyproxy/sturdy/internal/route/subst"
)

// ErrorPage replaces a backend's error answer (nginx's error_page with
// proxy_intercept_errors).
type ErrorPage struct {
	// Status is sent instead of the backend's; 0 keeps the backend's.
	Status      int
	ContentType string
	Body        []byte
}

// routeWriter is what a route's answers go through when the route changes
// answers: its response header rules, its request id, its error pages. It
// is the outermost writer, so that what it does comes before compression
// decides anything; it does its work once, when the status is written.
type routeWriter struct {
	http.ResponseWriter
	g    *Routing
	id   []string    // the request id as a header value; nil for none
	vars *subst.Vars // for response rules with variables
	head bool        // a HEAD request: no body

	pages   map[int]*ErrorPage
	armed   bool // backends' answers are being written: pages apply
	wrote   bool // the final status is written
	page    *ErrorPage
	swallow bool // the page was written; the backend's body goes nowhere
	sent    int  // the status the client got
}

func (w *routeWriter) WriteHeader(code int) {
	if w.wrote || code < 200 && code != http.StatusSwitchingProtocols {
		w.ResponseWriter.WriteHeader(code) // 1xx informational: passed on as it is
		return
	}
	w.wrote, w.sent = true, code
	h := w.Header()
	if pg := w.pages[code]; pg != nil && w.armed && code >= 300 {
		w.page, w.swallow = pg, true
		// The page is the whole answer: none of the backend's fields
		// describe it (nginx drops them too). What sturdy adds stays.
		hsts := h["Strict-Transport-Security"]
		clear(h)
		if hsts != nil {
			h["Strict-Transport-Security"] = hsts
		}
		h["Content-Type"] = []string{pg.ContentType}
		h["Content-Length"] = []string{strconv.Itoa(len(pg.Body))}
		h["Cache-Control"] = []string{"no-store"}
		if pg.Status != 0 {
			w.sent = pg.Status
		}
	}
	g := w.g
	if g.Response != nil {
		g.Response.Apply(h, w.vars)
	}
	if p := g.RequestID; p != nil && p.Response {
		h[p.Header] = w.id
	}
	w.ResponseWriter.WriteHeader(w.sent)
	if w.page != nil && !w.head {
		w.ResponseWriter.Write(w.page.Body)
	}
}

func (w *routeWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.swallow {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// FlushError passes flushes on for streamed answers.
func (w *routeWriter) FlushError() error {
	if w.swallow {
		return nil // the page is written whole at the end
	}
	switch f := w.ResponseWriter.(type) {
	case interface{ FlushError() error }:
		return f.FlushError()
	case http.Flusher:
		f.Flush()
		return nil
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Flush is FlushError for callers that want an http.Flusher.
func (w *routeWriter) Flush() { w.FlushError() }

// Unwrap lets http.ResponseController reach the real writer (Hijack for
// upgrades, deadlines).
func (w *routeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestIDOf returns the request id of the answer being written to w.
func requestIDOf(w http.ResponseWriter) string {
	if rw, ok := w.(*routeWriter); ok {
		if len(rw.id) > 0 {
			return rw.id[0]
		}
	}
	return ""
}

// writers recycles routeWriters: one per request on routes that change
// answers, and none of them outlives its request.
var writers = sync.Pool{New: func() any { return new(routeWriter) }}

// release returns the writer when the request is over.
func (w *routeWriter) release() {
	*w = routeWriter{}
	writers.Put(w)
}
