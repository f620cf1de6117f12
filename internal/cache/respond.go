package cache

import (
	"bytes"
	"context"
	"io"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// storedResponse is the answer to r from the stored response e, whose
// current age is age. Every answer from the store carries Age and a
// Cache-Status with ttl. A client whose own conditional matches e gets a
// 304; a HEAD gets no body.
func storedResponse(r *http.Request, e *entry, age time.Duration, cs cacheStatus) *http.Response {
	a := &storedAnswer{}
	h := make(http.Header, len(e.header)+2)
	// One backing array for every value, Age and Cache-Status included, as
	// http.Header.Clone does: the caller may change the answer's header
	// without reaching the store.
	n := 2
	for _, vv := range e.header {
		n += len(vv)
	}
	all := make([]string, n)
	for k, vv := range e.header {
		m := copy(all, vv)
		h[k] = all[:m:m]
		all = all[m:]
	}
	ageSec := int64(age / time.Second)
	all[0] = strconv.FormatInt(ageSec, 10)
	h["Age"] = all[0:1:1]
	cs.ttl, cs.hasTTL = int64(e.lifetime/time.Second)-ageSec, true
	all[1] = cacheStatusValue(h["Cache-Status"], &cs)
	h["Cache-Status"] = all[1:2:2]
	a.resp = http.Response{
		Status: statusLine(e.status), StatusCode: e.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, ContentLength: int64(len(e.body)), Body: &a.body, Request: r,
	}
	switch {
	case e.status == http.StatusOK && conditionalMatches(r, e.header):
		trimFor304(h)
		a.resp.Status, a.resp.StatusCode, a.resp.ContentLength = "304 Not Modified", http.StatusNotModified, 0
	case r.Method != http.MethodHead:
		a.body.Reset(e.body)
	}
	return &a.resp
}

// statusLine is Response.Status for code, without allocating for the
// statuses stored by default.
func statusLine(code int) string {
	switch code {
	case 200:
		return "200 OK"
	case 203:
		return "203 Non-Authoritative Information"
	case 204:
		return "204 No Content"
	case 300:
		return "300 Multiple Choices"
	case 301:
		return "301 Moved Permanently"
	case 308:
		return "308 Permanent Redirect"
	case 404:
		return "404 Not Found"
	case 405:
		return "405 Method Not Allowed"
	case 410:
		return "410 Gone"
	case 414:
		return "414 Request URI Too Long"
	case 501:
		return "501 Not Implemented"
	}
	return strconv.Itoa(code) + " " + http.StatusText(code)
}

// storedAnswer keeps a stored answer's response and its body reader in one
// allocation.
type storedAnswer struct {
	resp http.Response
	body memBody
}

// memBody is a body from memory. When the answer came from asking the
// origin (revalidated, stale-if-error, or a body the cache read itself),
// origin is the body Fetch returned, already closed: Unwrap returns it so
// that the caller can find what it attached to it, as with a tee.
type memBody struct {
	bytes.Reader
	origin io.ReadCloser
}

func (*memBody) Close() error { return nil }

// Unwrap returns the body of the origin's response, or nil.
func (b *memBody) Unwrap() io.ReadCloser { return b.origin }

// fromOrigin records that the answer resp came from the origin response
// whose body was body.
func fromOrigin(resp *http.Response, body io.ReadCloser) *http.Response {
	if m, ok := resp.Body.(*memBody); ok {
		m.origin = body
	}
	return resp
}

// trimFor304 drops representation metadata a 304 must not carry (RFC 9110
// 15.4.5); Cache-Control, Date, ETag, Expires, Vary and validators stay.
func trimFor304(h http.Header) {
	for _, k := range []string{"Content-Length", "Content-Type", "Content-Encoding",
		"Content-Language", "Content-Range", "Transfer-Encoding"} {
		delete(h, k)
	}
}

// conditionalMatches evaluates the client's If-None-Match, or failing that
// If-Modified-Since, against a response's validators (RFC 9110 13.2.2):
// true means the client's copy is current and a 304 answers it.
func conditionalMatches(r *http.Request, h http.Header) bool {
	if inm := r.Header["If-None-Match"]; len(inm) > 0 {
		etag := h.Get("ETag")
		if etag == "" {
			return false
		}
		for _, line := range inm {
			for tag := range etagList(line) {
				if tag == "*" || weakEqual(tag, etag) {
					return true
				}
			}
		}
		return false
	}
	ims := r.Header["If-Modified-Since"]
	if len(ims) == 0 {
		return false
	}
	since, err := http.ParseTime(ims[0])
	if err != nil {
		return false
	}
	lm, err := http.ParseTime(h.Get("Last-Modified"))
	return err == nil && !lm.After(since)
}

// etagList yields the members of an If-None-Match line; quoted entity tags
// may contain commas.
func etagList(s string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for len(s) > 0 {
			s = strings.TrimLeft(s, " \t,")
			i := 0
			inQuote := false
			for ; i < len(s); i++ {
				if s[i] == '"' {
					inQuote = !inQuote
				} else if s[i] == ',' && !inQuote {
					break
				}
			}
			if tag := strings.TrimSpace(s[:i]); tag != "" && !yield(tag) {
				return
			}
			s = s[i:]
		}
	}
}

// weakEqual is the weak comparison of RFC 9110 8.8.3.2.
func weakEqual(a, b string) bool {
	return strings.TrimPrefix(a, "W/") == strings.TrimPrefix(b, "W/")
}

// follow waits for the flight a request joined and answers from its result
// if it can: the stored (or revalidated) response when it matches this
// request's variant, or the stale copy when the leader found the origin
// failing. ok is false when the request must ask the origin itself.
func (c *Cache) follow(r *http.Request, p *Policy, rs *routeState, f *flight, m *miss) (resp *http.Response, res Result, ok bool) {
	select {
	case <-f.done:
	case <-r.Context().Done():
		return nil, Result{Status: StatusMiss, OriginErr: context.Cause(r.Context()), Collapsed: true}, true
	}
	rs.collapsed.Add(1)
	lead := f.res
	if e := lead.ent; e != nil && e.varyValues == varyValues(r.Header, e.varyNames) {
		resp = storedResponse(r, e, e.age(c.now()), cacheStatus{fwd: m.fwd, fwdStatus: lead.originStatus, collapsed: true})
		return resp, Result{Status: lead.status, OriginStatus: lead.originStatus, Collapsed: true}, true
	}
	if lead.staleOK {
		if e, _, _ := c.store.lookup(r, m.primary); e != nil {
			now := c.now()
			if age := e.age(now); staleIfErrorOK(e, age, p, false) {
				rs.staleAnswer(now)
				resp = storedResponse(r, e, age, cacheStatus{fwd: m.fwd, fwdStatus: lead.originStatus,
					collapsed: true, detail: "stale-if-error"})
				return resp, Result{Status: StatusStale, Stale: true, OriginStatus: lead.originStatus,
					OriginError: true, Collapsed: true}, true
			}
		}
	}
	return nil, Result{}, false
}
