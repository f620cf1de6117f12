package cache

import (
	"context"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// writeStored answers r with the stored response e, whose current age is
// age. Every answer from the store carries Age and a Cache-Status with ttl.
// A client whose own conditional matches e gets a 304.
func (c *Cache) writeStored(w http.ResponseWriter, r *http.Request, e *entry, age time.Duration, cs cacheStatus) {
	h := w.Header()
	copyStoredHeader(h, e.header)
	ageSec := int64(age / time.Second)
	h["Age"] = []string{strconv.FormatInt(ageSec, 10)}
	cs.ttl, cs.hasTTL = int64(e.lifetime/time.Second)-ageSec, true
	setCacheStatus(h, &cs)
	if e.status == http.StatusOK && conditionalMatches(r, e.header) {
		trimFor304(h)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.WriteHeader(e.status)
	if r.Method != http.MethodHead {
		w.Write(e.body) //nolint:errcheck // a client that went away is not our error
	}
}

// copyStoredHeader copies a stored header into the response's header. The
// values are copied (into one backing array, as http.Header.Clone does) so
// that nothing downstream can write into the stored entry.
func copyStoredHeader(dst, src http.Header) {
	n := 0
	for _, vv := range src {
		n += len(vv)
	}
	all := make([]string, n)
	for k, vv := range src {
		m := copy(all, vv)
		dst[k] = all[:m:m]
		all = all[m:]
	}
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
func (c *Cache) follow(w http.ResponseWriter, r *http.Request, p *Policy, rs *routeState, f *flight, m *miss) (res Result, ok bool) {
	select {
	case <-f.done:
	case <-r.Context().Done():
		return Result{Status: StatusMiss, OriginErr: context.Cause(r.Context()), Collapsed: true}, true
	}
	rs.collapsed.Add(1)
	lead := f.res
	if e := lead.ent; e != nil && e.varyValues == varyValues(r.Header, e.varyNames) {
		c.writeStored(w, r, e, e.age(c.now()), cacheStatus{fwd: m.fwd, fwdStatus: lead.originStatus, collapsed: true})
		return Result{Status: lead.status, OriginStatus: lead.originStatus, Collapsed: true}, true
	}
	if lead.staleOK {
		if e, _, _ := c.store.lookup(r, m.primary); e != nil {
			now := c.now()
			if age := e.age(now); staleIfErrorOK(e, age, p, false) {
				rs.staleAnswer(now)
				c.writeStored(w, r, e, age, cacheStatus{fwd: m.fwd, fwdStatus: lead.originStatus,
					collapsed: true, detail: "stale-if-error"})
				return Result{Status: StatusStale, Stale: true, OriginStatus: lead.originStatus,
					OriginError: true, Collapsed: true}, true
			}
		}
	}
	return Result{}, false
}
