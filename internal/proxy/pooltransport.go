package proxy

import (
	"fmt"
	"net/http"
	"time"

	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/health/balance"
	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// PoolTransport sends a request to the hosts of a pool under its health
// model: hosts in rotation in the policy's order, the next one when a
// connection fails (nothing was sent), every outcome recorded. It is how
// sturdy's own sub-requests (forward auth) reach a pool; clients' requests
// go through Handler, with retries, attribution and the empty-pool chain.
type PoolTransport struct {
	Pool     *health.Pool
	Upstream Upstream
}

// RoundTrip sends r; the response body releases the host when closed.
func (t *PoolTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var tried balance.Tried
	var hr health.Request // no client key, no route: what fails is the host's
	for {
		now := time.Now()
		h := t.Pool.Next(0, &tried, now)
		if h == nil {
			return nil, fmt.Errorf("pool %s has no host in rotation", t.Pool.Name)
		}
		tried.Add(h.Index())
		out := r.Clone(r.Context())
		out.URL.Scheme, out.URL.Host = t.Pool.Scheme, h.Target
		h.Acquire()
		resp, err := t.Upstream.RoundTrip(out)
		if err != nil {
			h.Release()
			c := outcome.Classify(err, r.Context().Err() != nil)
			if !c.Sent() {
				t.Pool.Record(h, c, &hr, now)
				continue
			}
			if c == outcome.ClientCancel {
				t.Pool.Record(h, c, &hr, now)
			} else {
				t.Pool.Settle(&hr, []health.Failure{{Host: h, Class: c}}, false, now)
			}
			return nil, err
		}
		if t.Pool.FailStatus(resp.StatusCode) {
			t.Pool.Settle(&hr, []health.Failure{{Host: h, Class: outcome.Status5xx, Status: resp.StatusCode}}, false, now)
		} else {
			t.Pool.Record(h, outcome.OK, &hr, now)
		}
		resp.Body = &releasingBody{ReadCloser: resp.Body, host: h}
		return resp, nil
	}
}
