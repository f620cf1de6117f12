package server

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// Per-host latency and bytes, as Prometheus scrapes them from a real
// sturdy: a host that takes 300 ms to answer has no attempt in the buckets
// up to 250 ms, its fast peer's time is far lower, and each host's body
// bytes each way are exactly what it was sent and answered (the answers
// are large enough to be spliced from socket to socket on Linux).
func TestHostLatencyAndBytesInMetrics(t *testing.T) {
	t.Parallel()
	answer := strings.Repeat("x", 100<<10)
	handler := func(delay time.Duration) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// real: the latency under test is what sturdy measures on
			// the real clock around a real socket's answer.
			time.Sleep(delay)
			w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
			io.WriteString(w, answer)
		})
	}
	fast, slow := backend(t, "127.0.0.1", handler(0)), backend(t, "127.0.0.1", handler(300*time.Millisecond))
	s, url, _ := startSturdy(t, parseConfig(t, `
admin: { listen: "127.0.0.1:0" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: web, timeouts: { response_header: 5s } } ]
pools: [ { name: web, hosts: [ { addr: "{{fast}}" }, { addr: "{{slow}}" } ] } ]
`, map[string]string{"fast": addr(fast), "slow": addr(slow)}))
	const requests, sentEach = 10, 100
	for i := range requests {
		resp, err := http.Post(fmt.Sprintf("%s/%d", url, i), "text/plain", strings.NewReader(strings.Repeat("y", sentEach)))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || n != int64(len(answer)) {
			t.Fatalf("request %d: %d, %d bytes", i, resp.StatusCode, n)
		}
	}
	// A host's bytes are counted as its answer's copy ends, which is
	// after the client has read the last byte: wait for the last
	// request to leave the route before reading the counters.
	site := s.Runtime().Route("site")
	if !testutil.Eventually(5*time.Second, func() bool { return site.Stats.InFlight.Load() == 0 }) {
		t.Fatalf("%d requests still in flight on the route", site.Stats.InFlight.Load())
	}
	_, body := adminGet(t, s, "/metrics")
	num := func(prefix string) float64 {
		t.Helper()
		v, err := strconv.ParseFloat(metric(t, body, prefix), 64)
		if err != nil {
			t.Fatalf("%s: %v", prefix, err)
		}
		return v
	}
	total := 0.0
	sums := map[string]float64{}
	for _, h := range []string{addr(fast), addr(slow)} {
		l := `host="` + h + `",pool="web"`
		n := num(`sturdy_upstream_attempts_total{host="` + h + `",outcome="ok",pool="web"}`)
		total += n
		if got := num(`sturdy_upstream_header_duration_seconds_count{` + l + `}`); got != n {
			t.Errorf("%s: %v header times for %v answers", h, got, n)
		}
		if got := num(`sturdy_upstream_received_bytes_total{` + l + `}`); got != n*float64(len(answer)) {
			t.Errorf("%s: received %v bytes in %v answers of %d", h, got, n, len(answer))
		}
		if got := num(`sturdy_upstream_sent_bytes_total{` + l + `}`); got != n*sentEach {
			t.Errorf("%s: sent %v bytes in %v requests of %d", h, got, n, sentEach)
		}
		sums[h] = num(`sturdy_upstream_header_duration_seconds_sum{` + l + `}`)
	}
	if total != requests {
		t.Fatalf("%v attempts for %d requests", total, requests)
	}
	sl := `host="` + addr(slow) + `",pool="web"`
	n := num(`sturdy_upstream_attempts_total{host="` + addr(slow) + `",outcome="ok",pool="web"}`)
	if n == 0 {
		t.Fatal("the slow host got no request")
	}
	if got := num(`sturdy_upstream_header_duration_seconds_bucket{` + sl + `,le="0.25"}`); got != 0 {
		t.Errorf("%v attempts of the 300 ms host in the bucket up to 250 ms", got)
	}
	if sums[addr(slow)] < 0.3*n || sums[addr(slow)] <= sums[addr(fast)] {
		t.Errorf("time to headers: slow host %.3fs over %v answers, fast host %.3fs", sums[addr(slow)], n, sums[addr(fast)])
	}
}
