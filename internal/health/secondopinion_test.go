package health

import (
	"testing"

	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// "The same request failed the same way on two backends" needs two
// backends. The same host twice (a keep-alive resend, or a copy of it
// from a reloaded config) is one opinion: the failures are the host's.
func TestTheSameHostTwiceIsNotTwoBackends(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fails func(p *Pool) []Failure
		want  Attribution
	}{
		{"the same host twice", func(p *Pool) []Failure {
			return []Failure{{Host: p.Hosts[0], Class: outcome.EOFBeforeResponse, Status: 0}, {Host: p.Hosts[0], Class: outcome.EOFBeforeResponse, Status: 0}}
		}, AttrHost},
		{"the same host under two configs", func(p *Pool) []Failure {
			again := *p.Hosts[0] // a reload's Host shares the state
			return []Failure{{Host: p.Hosts[0], Class: outcome.Reset, Status: 0}, {Host: &again, Class: outcome.Reset, Status: 0}}
		}, AttrHost},
		{"two hosts, different failures", func(p *Pool) []Failure {
			return []Failure{{Host: p.Hosts[0], Class: outcome.Reset, Status: 0}, {Host: p.Hosts[1], Class: outcome.EOFBeforeResponse, Status: 0}}
		}, AttrHost},
		{"two hosts, the same failure", func(p *Pool) []Failure {
			return []Failure{{Host: p.Hosts[0], Class: outcome.Status5xx, Status: 502}, {Host: p.Hosts[1], Class: outcome.Status5xx, Status: 502}}
		}, AttrRequest},
		{"a stale connection alone", func(p *Pool) []Failure {
			return []Failure{{Host: p.Hosts[0], Class: outcome.EOFBeforeResponse, Stale: true}}
		}, None},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, p, _ := setup(t, 2, "{}", nil)
			rt := route(m, "a", 0)
			fails := tc.fails(p)
			got := p.Settle(req(rt, "192.0.2.1"), fails, true, t0)
			if got != tc.want {
				t.Fatalf("attributed to %q, want %q", got, tc.want)
			}
			if tc.want != AttrHost && m.AttributedCount(AttrHost) != 0 {
				t.Fatalf("%d failures charged to hosts", m.AttributedCount(AttrHost))
			}
		})
	}
}
