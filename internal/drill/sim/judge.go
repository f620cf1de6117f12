package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// Bounds of the invariants.
const (
	// NameBound: every fault not a host's is named within it.
	NameBound = 10 * time.Second
	// ActBound: every host fault is acted on (ejected, down, or named
	// as disagreeing with its probe) within it.
	ActBound = 10 * time.Second
	// InnocentBound is the largest share of innocent clients' requests
	// that may fail (5xx or no answer), counted apart from requests the
	// truth says fail anyway (the killing request, a route's failing
	// endpoint, anything while sturdy is out of descriptors).
	InnocentBound = 0.05
	// grace is how long after a fault ends a conclusion about it still
	// counts as right: evidence arrives late. A host's passive evidence
	// lasts its window: an ejection that late names the right owner, if
	// late (hostGrace).
	grace     = 5 * time.Second
	hostGrace = 10 * time.Second
)

// Invariant names.
const (
	InvInnocents     = "innocents' errors bounded"
	InvWrongEjection = "no host ejected for a fault it does not own"
	InvHostActed     = "every host fault acted on within the bound"
	InvNamed         = "every other fault named within 10 s"
)

// Conclusion is one thing sturdy concluded, judged against the truth.
type Conclusion struct {
	Class Class
	ID    string        // the host IP, client IP, route, request path, or "reason:NAME"
	At    time.Duration // since the run began
	Via   string        // the event type, "answer" or the counter
	// Client sent the request an answer blamed (request conclusions).
	Client string
	Fault  int // index of the fault it names rightly, or -1: wrong
}

// Right reports whether the conclusion names a true owner.
func (c Conclusion) Right() bool { return c.Fault >= 0 }

// Outcome is what became of one true fault.
type Outcome struct {
	Fault
	Named bool          // a right conclusion named it
	After time.Duration // from when it could first show (visibleFrom) to the first right conclusion
	// Due: the invariant's bound applies (the fault lasted longer than
	// the bound and its owner acted while it lasted).
	Due bool
	// Ejected: the host was taken out for a fault whose right answer is
	// to keep it (a shedding host).
	Ejected bool
}

// Violation is an invariant broken in a run.
type Violation struct {
	Invariant string
	Detail    string
	// Known is the issue the others are fixing, when the invariant is
	// known to break this way on main (see Known); "" when it is news.
	Known string
}

// Report is one run judged.
type Report struct {
	World       World
	Variant     string
	Conclusions []Conclusion
	Outcomes    []Outcome
	// Innocent counts the innocent clients' requests (apart from those the
	// truth says fail) and those that failed.
	InnocentRequests, InnocentErrors int
	// InnocentBlamed counts the innocents' failed requests that sturdy
	// answered as the request's own fault ("failed the same way on two
	// backends"): none of them was the killing request.
	InnocentBlamed int
	// InnocentPOSTErrors counts the failed innocent requests that were
	// POSTs.
	InnocentPOSTErrors int
	// BlamedOneHost counts, of those, the requests that reached one host
	// only (a resend or a retry to the same host): "two backends" that
	// were one; BlamedTwoHosts those that reached two.
	BlamedOneHost, BlamedTwoHosts int
	// Charged is attributed_failures at the end of the run.
	Charged view.Attribution
	// LostCapacity is the share of host time out of rotation without a
	// fault of its own: capacity lost to wrong ejections.
	LostCapacity float64
	Violations   []Violation
}

// InnocentErrorRate is InnocentErrors / InnocentRequests (0 without any).
func (r *Report) InnocentErrorRate() float64 {
	if r.InnocentRequests == 0 {
		return 0
	}
	return float64(r.InnocentErrors) / float64(r.InnocentRequests)
}

// Distinct returns the conclusions once per class, owner and rightness,
// the first of each: what precision counts (a host ejected twice for the
// same wrong reason is one wrong conclusion). Answers that blamed the
// request are all kept: each is a conclusion about one request.
func (r *Report) Distinct() []Conclusion {
	type key struct {
		c     Class
		id    string
		right bool
	}
	seen := map[key]bool{}
	var out []Conclusion
	for _, c := range r.Conclusions {
		k := key{c.Class, c.ID, c.Right()}
		if c.Class == ClassRequest {
			out = append(out, c)
			continue
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, c)
		}
	}
	return out
}

// Unexpected returns the violations no known issue explains.
func (r *Report) Unexpected() []Violation {
	var out []Violation
	for _, v := range r.Violations {
		if v.Known == "" {
			out = append(out, v)
		}
	}
	return out
}

func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s(%s)", r.World, r.Variant)
	fmt.Fprintf(&b, "\n  innocents: %d of %d failed (%d POSTs; %d blamed on the request: %d reached one host only, %d two); charged %v; capacity lost %.1f%%",
		r.InnocentErrors, r.InnocentRequests, r.InnocentPOSTErrors, r.InnocentBlamed, r.BlamedOneHost, r.BlamedTwoHosts, r.Charged, 100*r.LostCapacity)
	blamed := map[bool]int{}
	for _, c := range r.Distinct() {
		if c.Class == ClassRequest {
			blamed[c.Right()]++
			continue
		}
		fmt.Fprintf(&b, "\n  concluded %s %s at %v via %s (right: %v)", c.Class, c.ID, c.At.Round(10*time.Millisecond), c.Via, c.Right())
	}
	if len(blamed) > 0 {
		fmt.Fprintf(&b, "\n  answered as the request's own failure: %d rightly, %d wrongly", blamed[true], blamed[false])
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "\n  VIOLATED %s: %s", v.Invariant, v.Detail)
		if v.Known != "" {
			fmt.Fprintf(&b, " (known: %s)", v.Known)
		}
	}
	return b.String()
}

// hostActions are the events that act against a host.
var hostActions = []string{event.HostEjected, event.HostDown, event.ProbeDisagrees}

// reasonKinds maps the edge's client_fault reasons to the client fault
// each one names.
var reasonKinds = map[string]Kind{
	"malformed_body":    ClientMalformed,
	"short_body":        ClientMalformed,
	"ambiguous_framing": ClientMalformed,
	"body_timeout":      ClientStall,
	"499":               ClientHangup,
}

func judge(w *World, v Variant, o *observer, all []answer) *Report {
	r := &Report{World: *w, Variant: v.String()}
	r.Conclusions = conclusions(w, o, all)
	for i := range r.Conclusions {
		r.Conclusions[i].Fault = match(w, r.Conclusions[i])
	}
	r.outcomes(w, all)
	r.innocents(w, all)
	if n := len(o.samples); n > 0 {
		r.Charged = o.samples[n-1].attributed
	}
	r.lostCapacity(w, o.samples)
	r.check(w)
	return r
}

// conclusions gathers what sturdy said: its events, the answers that
// blamed the request, and the client faults its counters show.
func conclusions(w *World, o *observer, all []answer) []Conclusion {
	var cs []Conclusion
	for _, s := range o.recorded() {
		e := s.e
		switch {
		case slices.Contains(hostActions, e.Type):
			cs = append(cs, Conclusion{Class: ClassHost, ID: ipOf(e.Host), At: s.at, Via: e.Type})
		case e.Type == event.ClientAttributed:
			cs = append(cs, Conclusion{Class: ClassClient, ID: e.Client, At: s.at, Via: e.Type})
		case e.Type == event.RouteDegraded:
			cs = append(cs, Conclusion{Class: ClassRoute, ID: e.Route, At: s.at, Via: e.Type})
		case e.Type == event.ResourceExhausted:
			cs = append(cs, Conclusion{Class: ClassSturdy, ID: "sturdy", At: s.at, Via: e.Type})
		}
	}
	// Each answer that blamed the request is a conclusion of its own:
	// precision for requests is counted in answers.
	for _, a := range all {
		if a.blamed {
			cs = append(cs, Conclusion{Class: ClassRequest, ID: a.path, At: a.at, Via: "answer", Client: a.client})
		}
	}
	// A counter that rose names its reason's faults; the innocents' own
	// requests, cut when the run ends, are not counted.
	for i := 1; i < len(o.samples); i++ {
		prev, cur := o.samples[i-1], o.samples[i]
		if cur.at > w.Duration {
			break
		}
		for reason, n := range cur.faults {
			if n > prev.faults[reason] {
				cs = append(cs, Conclusion{Class: ClassClient, ID: "reason:" + reason, At: cur.at, Via: "client_fault/" + reason})
			}
		}
		if cur.gone > prev.gone {
			cs = append(cs, Conclusion{Class: ClassClient, ID: "reason:499", At: cur.at, Via: "route requests 499"})
		}
	}
	slices.SortStableFunc(cs, func(a, b Conclusion) int { return int(a.At - b.At) })
	return cs
}

// match returns the first fault c rightly names, or -1. An answer that
// blamed a faulty client's own request is right too: the request is the
// client's, and design.md counts the client's request as the client's.
func match(w *World, c Conclusion) int {
	for i, f := range w.Faults {
		if names(f, c) {
			return i
		}
		if c.Class == ClassRequest && f.Kind.Owner() == ClassClient && f.Owner == c.Client && c.At >= f.Start && c.At <= f.End+grace {
			return i
		}
	}
	return -1
}

// names reports whether c rightly names f: its owner, while it lasts
// (or a little after).
func names(f Fault, c Conclusion) bool {
	g := grace
	if c.Class == ClassHost {
		g = hostGrace
	}
	if f.Kind.Owner() != c.Class || !f.Kind.acted() || c.At < f.Start || c.At > f.End+g {
		return false
	}
	if reason, ok := strings.CutPrefix(c.ID, "reason:"); ok {
		return reasonKinds[reason] == f.Kind
	}
	return c.ID == f.Owner
}

func (r *Report) outcomes(w *World, all []answer) {
	for _, f := range w.Faults {
		from := visibleFrom(w, f)
		o := Outcome{Fault: f, Due: f.Kind.acted() && f.End-from >= NameBound}
		if f.Kind == RequestKill {
			// Due only if the killing request was sent a few times while
			// it could show.
			n := 0
			for _, a := range all {
				if a.path == f.Owner && a.at >= from && a.at < from+NameBound {
					n++
				}
			}
			o.Due = o.Due && n >= 3
		}
		for _, c := range r.Conclusions {
			if names(f, c) {
				o.Named, o.After = true, max(c.At-from, 0)
				break
			}
		}
		if !f.Kind.acted() {
			for _, c := range r.Conclusions {
				if c.Class == ClassHost && c.ID == f.Owner && c.At >= f.Start && c.At <= f.End+grace {
					o.Ejected = true
				}
			}
		}
		r.Outcomes = append(r.Outcomes, o)
	}
}

// visibleFrom is when f can first show: its start, or, for a killing
// request, the end of the faults of its route that cover its start. The
// simulated hosts play a route's fault before a request's (host.go), so
// while its route fails or hangs, the killing request never reaches what
// kills it: no proxy could name it then, and the bound counts from when
// it can be seen. (f.End when it never can.)
func visibleFrom(w *World, f Fault) time.Duration {
	from := f.Start
	if f.Kind != RequestKill {
		return from
	}
	route, _ := splitRoute(f.Owner)
	for moved := true; moved && from < f.End; {
		moved = false
		for _, g := range w.Faults {
			if g.Kind.Owner() == ClassRoute && g.Owner == route && g.activeAt(from) {
				from, moved = g.End, true
			}
		}
	}
	return min(from, f.End)
}

// innocents counts the innocent clients' requests that the truth says
// should succeed, and how many failed.
func (r *Report) innocents(w *World, all []answer) {
	innocent := map[string]bool{}
	for _, ip := range w.Clients {
		innocent[ip] = true
	}
	for _, a := range all {
		if !innocent[a.client] || a.at >= w.Duration || doomed(w, a) {
			continue
		}
		r.InnocentRequests++
		if a.status == 0 || a.status >= 500 {
			r.InnocentErrors++
			if a.post {
				r.InnocentPOSTErrors++
			}
		}
		if a.blamed {
			r.InnocentBlamed++
		}
	}
}

// doomed reports whether the truth says a fails whatever sturdy does:
// the killing request, a failing route's endpoint, sturdy without
// descriptors.
func doomed(w *World, a answer) bool {
	for _, f := range w.Faults {
		if a.at < f.Start || a.at >= f.End {
			continue
		}
		route, _ := splitRoute(a.path)
		switch {
		case f.Kind == SturdyFDs,
			f.Kind == RequestKill && a.path == f.Owner,
			f.Kind.Owner() == ClassRoute && route == f.Owner:
			return true
		}
	}
	return false
}

// lostCapacity sums the host time out of rotation with no fault of the
// host's own to justify it.
func (r *Report) lostCapacity(w *World, samples []sample) {
	var lost time.Duration
	for i := 1; i < len(samples); i++ {
		dt := samples[i].at - samples[i-1].at
		for ip, out := range samples[i].out {
			if out && !ownsHostFault(w, ip, samples[i].at) {
				lost += dt
			}
		}
	}
	r.LostCapacity = float64(lost) / float64(time.Duration(len(w.Hosts))*(w.Duration+tail))
}

func ownsHostFault(w *World, ip string, at time.Duration) bool {
	for _, f := range w.Faults {
		if f.Kind.Owner() == ClassHost && f.Kind.acted() && f.Owner == ip && at >= f.Start && at <= f.End+hostGrace {
			return true
		}
	}
	return false
}

// check applies the invariants, marking those broken the way a known
// issue does.
func (r *Report) check(w *World) {
	var present []Kind
	for _, f := range w.Faults {
		present = append(present, f.Kind)
	}
	add := func(inv, detail string, subject Kind) {
		r.Violations = append(r.Violations, Violation{Invariant: inv, Detail: detail, Known: knownFor(inv, subject, present, len(w.Hosts))})
	}
	if rate := r.InnocentErrorRate(); rate > InnocentBound {
		add(InvInnocents, fmt.Sprintf("%d of %d innocent requests failed (%.1f%%, bound %.0f%%)", r.InnocentErrors, r.InnocentRequests, 100*rate, 100*InnocentBound), "")
	}
	for _, c := range r.Distinct() {
		if c.Class != ClassHost || c.Right() {
			continue
		}
		detail := fmt.Sprintf("host %s: %s at %v", c.ID, c.Via, c.At.Round(10*time.Millisecond))
		// A host ejected while shedding (or closing) is explained by that
		// only; any other host's wrong ejection by the run's other faults.
		if k := kept(w, c.ID, c.At); k != "" {
			add(InvWrongEjection, detail, k)
			continue
		}
		others := slices.DeleteFunc(slices.Clone(present), func(k Kind) bool { return !k.acted() })
		r.Violations = append(r.Violations, Violation{Invariant: InvWrongEjection, Detail: detail, Known: knownFor(InvWrongEjection, "", others, len(w.Hosts))})
	}
	for _, o := range r.Outcomes {
		if !o.Due {
			continue
		}
		late := !o.Named || o.After > NameBound
		switch {
		case o.Kind.Owner() == ClassHost && (!o.Named || o.After > ActBound):
			add(InvHostActed, fmt.Sprintf("%s: named %v after %v", o.Fault, o.Named, o.After.Round(10*time.Millisecond)), o.Kind)
		case o.Kind.Owner() != ClassHost && late:
			add(InvNamed, fmt.Sprintf("%s: named %v after %v", o.Fault, o.Named, o.After.Round(10*time.Millisecond)), o.Kind)
		}
	}
	// Innocents' errors above the bound in a run with a known break
	// follow from it: a host acted on late fails them until it is.
	for i := range r.Violations {
		v := &r.Violations[i]
		if v.Invariant != InvInnocents || v.Known != "" {
			continue
		}
		for _, o := range r.Violations {
			if o.Known != "" && o.Invariant != InvInnocents {
				v.Known = "follows from " + o.Known
				break
			}
		}
	}
}

// kept is the kind of the host's fault at (or just before) at whose
// right answer is to keep the host (shedding, closing), or "".
func kept(w *World, ip string, at time.Duration) Kind {
	for _, f := range w.Faults {
		if !f.Kind.acted() && f.Owner == ip && at >= f.Start && at <= f.End+grace {
			return f.Kind
		}
	}
	return ""
}

// blamedReach counts on how many hosts the innocents' blamed requests
// were tried, from what the hosts saw.
func (r *Report) blamedReach(w *World, all []answer, seen *ledger) {
	for _, a := range all {
		if !a.blamed || a.id == "" || a.at >= w.Duration || doomed(w, a) {
			continue
		}
		switch _, hosts := seen.reached(a.id); hosts {
		case 0, 1:
			r.BlamedOneHost++
		default:
			r.BlamedTwoHosts++
		}
	}
}
