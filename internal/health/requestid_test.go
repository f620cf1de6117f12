package health

import (
	"fmt"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// The request whose failure attributes a client names itself in the
// event, so that the event leads to its access log line.
func TestClientAttributedEventCarriesRequestID(t *testing.T) {
	m, hp, rec := setup(t, 2, "{}", nil)
	rt := route(m, "a", 0)
	now := t0
	for i := range 20 {
		now = now.Add(100 * time.Millisecond)
		for c := range 4 {
			hp.Record(hp.Hosts[(i+c)%2], outcome.OK, req(rt, fmt.Sprintf("192.0.2.%d", c)), now)
		}
		r := req(rt, "203.0.113.66")
		r.RequestID = fmt.Sprintf("req-%d", i)
		hp.Settle(r, []Failure{{Host: hp.Hosts[0], Class: outcome.Status5xx, Status: 502}, {Host: hp.Hosts[1], Class: outcome.Status5xx, Status: 502}}, true, now)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, e := range rec.evs {
		if e.Type != event.ClientAttributed {
			continue
		}
		if id, _ := e.Evidence["request_id"].(string); id == "" || id[:4] != "req-" {
			t.Fatalf("client_attributed evidence %v; want the request_id of the request that tipped it", e.Evidence)
		}
		return
	}
	t.Fatal("no client_attributed event")
}
