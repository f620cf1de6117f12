package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// A world drawn from a seed is the same every time, and keeps the rules
// that make its truth well defined: at most half the pool's hosts at
// fault, a healthy route beside every failing one, gray hosts only where
// a probe can pass, faults long enough to be named within the bound.
func TestDrawnWorldsKeepTheirRules(t *testing.T) {
	for seed := uint64(1); seed <= 2000; seed++ {
		w := Draw(seed, Shape{})
		if again := Draw(seed, Shape{}); again.String() != w.String() {
			t.Fatalf("seed %d drew two worlds:\n%s\n%s", seed, w, again)
		}
		if len(w.Faults) == 0 || len(w.Clients) < 3 {
			t.Fatalf("seed %d: no fault or too few innocents:\n%s", seed, w)
		}
		hosts, routes := 0, 0
		for _, f := range w.Faults {
			switch f.Kind.Owner() {
			case ClassHost:
				hosts++
			case ClassRoute:
				routes++
			}
			if f.Kind == HostGray && !w.Active {
				t.Errorf("seed %d: a gray host without active checks", seed)
			}
			if f.End-f.Start < NameBound || f.End > w.Duration || f.Start <= 0 {
				t.Errorf("seed %d: %s does not fit the run", seed, f)
			}
		}
		if hosts > len(w.Hosts)/2 {
			t.Errorf("seed %d: %d of %d hosts at fault", seed, hosts, len(w.Hosts))
		}
		if routes > 0 && routes >= w.Routes {
			t.Errorf("seed %d: no healthy route beside %d failing ones", seed, routes)
		}
	}
}

// The judge against made-up conclusions: each invariant breaks when it
// should, and a break is known only as known.go says.
func TestJudgeNamesWrongConclusionsAndBrokenInvariants(t *testing.T) {
	w := World{
		Seed: 1, Duration: 30 * time.Second, Routes: 2,
		HostIPs: []string{"127.1.0.1", "127.1.0.2", "127.1.0.3", "127.1.0.4"},
		Hosts:   []string{"127.1.0.1:1", "127.1.0.2:1", "127.1.0.3:1", "127.1.0.4:1"},
		Clients: []string{"127.0.1.1", "127.0.1.2", "127.0.1.3"},
		Faults: []Fault{
			{Kind: Host5xx, Owner: "127.1.0.1", Index: 0, Start: 2 * time.Second, End: 20 * time.Second, Rate: 1},
			{Kind: HostShed, Owner: "127.1.0.2", Index: 1, Start: 2 * time.Second, End: 20 * time.Second, Rate: 0.5},
			{Kind: ClientMalformed, Owner: "127.0.2.1", Start: 5 * time.Second, End: 25 * time.Second, Rate: 1},
			{Kind: RouteFailing, Owner: "r1", Index: 1, Start: 5 * time.Second, End: 25 * time.Second},
		},
	}
	at := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	o := &observer{w: &w, events: []seen{
		{at(2.5), event.Event{Type: event.HostEjected, Host: "127.1.0.1:1"}},    // right, in 0.5 s
		{at(3), event.Event{Type: event.HostEjected, Host: "127.1.0.2:1"}},      // wrong: it sheds (known, #32 item 3)
		{at(4), event.Event{Type: event.HostEjected, Host: "127.1.0.3:1"}},      // wrong, and nothing explains it
		{at(6), event.Event{Type: event.ClientAttributed, Client: "127.0.1.2"}}, // an innocent
	}}
	o.samples = []sample{
		{at: at(5), faults: map[string]uint64{}},
		{at: at(5.5), faults: map[string]uint64{"malformed_body": 1}, attributed: view.Attribution{"host": 3}},
	}
	all := []answer{
		{at: at(1), client: "127.0.1.1", path: "/r0/page/1", status: 200},
		{at: at(7), client: "127.0.1.1", path: "/r1/page/1", status: 502, blamed: true}, // a failing route's: doomed, and a wrong request blame
		{at: at(8), client: "127.0.1.3", path: "/r0/page/2", status: 502},
	}
	r := judge(&w, Variant{Frontend: "net/http"}, o, all)

	right := map[string]bool{}
	for _, c := range r.Distinct() {
		right[string(c.Class)+" "+c.ID] = c.Right()
	}
	want := map[string]bool{
		"host 127.1.0.1": true, "host 127.1.0.2": false, "host 127.1.0.3": false,
		"client 127.0.1.2": false, "client reason:malformed_body": true, "request /r1/page/1": false,
	}
	for k, v := range want {
		if got, ok := right[k]; !ok || got != v {
			t.Errorf("conclusion %q: right %v (present %v), want %v", k, got, ok, v)
		}
	}
	if r.InnocentRequests != 2 || r.InnocentErrors != 1 {
		t.Errorf("innocents: %d of %d failed, want 1 of 2 (the failing route's answer is doomed)", r.InnocentErrors, r.InnocentRequests)
	}
	broken := map[string]int{}
	for _, v := range r.Violations {
		broken[v.Invariant]++
	}
	for inv, n := range map[string]int{
		InvInnocents:     1, // 50% > 5%
		InvWrongEjection: 2, // the shedding host and 127.1.0.3
		InvNamed:         1, // the route was never named
		InvHostActed:     0, // 127.1.0.1 in 0.5 s
	} {
		if broken[inv] != n {
			t.Errorf("%q broken %d times, want %d: %v", inv, broken[inv], n, r.Violations)
		}
	}
	// Only the shedding host's ejection is explained by its shedding:
	// the other host did not shed.
	for _, v := range r.Violations {
		if v.Invariant != InvWrongEjection {
			continue
		}
		want := ""
		if strings.Contains(v.Detail, "127.1.0.2") {
			want = knownFor(InvWrongEjection, HostShed, nil, 2)
		}
		if v.Known != want {
			t.Errorf("%s: known %q, want %q", v.Detail, v.Known, want)
		}
	}
	for _, o := range r.Outcomes {
		if o.Kind == Host5xx && (!o.Named || o.After != 500*time.Millisecond) {
			t.Errorf("host_5xx: named %v after %v, want after 500ms", o.Named, o.After)
		}
		if o.Kind == HostShed && !o.Ejected {
			t.Error("the shedding host's ejection is not counted")
		}
	}
}

// A killing request on a route whose own fault covers its start cannot
// show until that fault ends (the hosts answer the route's failure
// first): the bound counts from then. One on a healthy route counts from
// its start, as before; one hidden to its end is not due.
func TestKillingRequestIsJudgedFromWhenItCanShow(t *testing.T) {
	at := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	w := World{
		Seed: 1, Duration: 40 * time.Second, Routes: 3,
		HostIPs: []string{"127.1.0.1", "127.1.0.2", "127.1.0.3"},
		Hosts:   []string{"127.1.0.1:1", "127.1.0.2:1", "127.1.0.3:1"},
		Clients: []string{"127.0.1.1", "127.0.1.2", "127.0.1.3"},
		Faults: []Fault{
			{Kind: RouteFailing, Owner: "r0", Index: 0, Start: at(2), End: at(8)},
			{Kind: RouteSlow, Owner: "r0", Index: 0, Start: at(7), End: at(14)},
			{Kind: RequestKill, Owner: "/r0/item/kill-2", Index: 0, Start: at(3), End: at(30)},
			{Kind: RequestKill, Owner: "/r1/item/kill-3", Index: 1, Start: at(3), End: at(30)},
			{Kind: RouteFailing, Owner: "r2", Index: 2, Start: at(2), End: at(36)},
			{Kind: RequestKill, Owner: "/r2/item/kill-5", Index: 2, Start: at(3), End: at(35)},
		},
	}
	var all []answer
	for s := 1.0; s < 40; s++ {
		for _, p := range []string{"/r0/item/kill-2", "/r1/item/kill-3", "/r2/item/kill-5"} {
			all = append(all, answer{at: at(s), client: "127.0.1.1", path: p, status: 502})
		}
	}
	// Both killing requests named at 20 s: 6 s after the masks of r0 end,
	// 17 s after the r1 one began.
	all = append(all,
		answer{at: at(20), client: "127.0.1.1", path: "/r0/item/kill-2", status: 502, blamed: true},
		answer{at: at(20), client: "127.0.1.1", path: "/r1/item/kill-3", status: 502, blamed: true})
	r := judge(&w, Variant{Frontend: "net/http"}, &observer{w: &w}, all)
	want := map[string]struct {
		due   bool
		after time.Duration
	}{
		"/r0/item/kill-2": {true, at(6)},
		"/r1/item/kill-3": {true, at(17)},
		"/r2/item/kill-5": {false, 0},
	}
	for _, o := range r.Outcomes {
		wo, ok := want[o.Owner]
		if !ok {
			continue
		}
		if o.Due != wo.due || o.After != wo.after {
			t.Errorf("%s: due %v after %v, want due %v after %v", o.Fault, o.Due, o.After, wo.due, wo.after)
		}
	}
	late := 0
	for _, v := range r.Violations {
		if v.Invariant == InvNamed && strings.Contains(v.Detail, "request_kill") {
			late++
			if !strings.Contains(v.Detail, "/r1/item/kill-3") {
				t.Errorf("wrong request judged late: %s", v.Detail)
			}
		}
	}
	if late != 1 {
		t.Errorf("%d killing requests judged late, want 1 (the unmasked one): %v", late, r.Violations)
	}
}
