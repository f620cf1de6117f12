package status

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/view"
)

// Problems lists what needs attention in st, one problem per cause, worst
// first. A cause is a failing host (once, however many pools it serves),
// a route failing for reasons of its own, or one fact about sturdy itself.
// The symptoms a cause produces (a pool short of hosts, a route on its
// sorry page or on stale copies, a 503 from /readyz) are listed beneath
// it, not as problems of their own, so that one dead backend is one
// problem however many pools and routes it reaches.
//
// A problem is critical only when clients are failed or get degraded
// answers; a host out of a pool that still serves every client as usual
// is a warning.
func Problems(st view.Status) []view.Problem {
	d := diagnosis{st: st, routesOf: map[string][]view.Route{}, pools: map[string]view.Pool{}}
	for _, p := range st.Pools {
		d.pools[p.Name] = p
	}
	for _, r := range st.Routes {
		if r.Pool != "" {
			d.routesOf[r.Pool] = append(d.routesOf[r.Pool], r)
		}
	}
	d.hosts()
	d.routes()
	d.process()
	sort.SliceStable(d.out, func(i, j int) bool {
		a, b := d.out[i], d.out[j]
		if levelRank[a.Level] != levelRank[b.Level] {
			return levelRank[a.Level] > levelRank[b.Level]
		}
		if kindRank[a.Kind] != kindRank[b.Kind] {
			return kindRank[a.Kind] < kindRank[b.Kind]
		}
		return a.Subject < b.Subject
	})
	return d.out
}

var levelRank = map[string]int{view.LevelOK: 0, view.LevelInfo: 1, view.LevelWarning: 2, view.LevelCritical: 3}

// kindRank orders problems of one level: what sturdy does to itself
// first, then the backends, the routes, and facts about the rest.
var kindRank = map[string]int{"process": 0, "readiness": 1, "host": 2, "route": 3, "certificate": 4, "dns": 5, "reload": 6, "webhook": 7, "clients": 8}

type diagnosis struct {
	st       view.Status
	pools    map[string]view.Pool
	routesOf map[string][]view.Route // by pool name
	// failingPools are the pools with a host among the causes: a route on
	// one that answers by a degraded path is their symptom.
	failingPools map[string]bool
	covered      map[string]bool // not-ready reasons shown under their cause
	out          []view.Problem
}

// Host states by how bad they are; a host in several pools is described
// by its worst.
var stateRank = map[string]int{view.Healthy: 0, view.Drained: 1, view.Maintenance: 2, view.Suspect: 3, view.Ejected: 4, view.Down: 5}

// ServingWords says how a route answers, for each degraded path.
var servingWords = map[string]string{
	view.ServingPanic:    "routes to hosts ejected on passive evidence (panic mode)",
	view.ServingFallback: "answers from its fallback pool",
	view.ServingStale:    "answers with stale cached copies",
	view.ServingSorry:    "answers with the sorry page (503)",
}

func serving(r view.Route) string {
	if w := servingWords[r.Serving]; w != "" {
		return w
	}
	return "answers by " + r.Serving
}

// degraded reports whether a route's clients get degraded answers now.
func degraded(r view.Route) bool { return r.Serving != "" && r.Serving != view.ServingNormal }

// failing reports whether a host is a cause: out of rotation, suspect,
// failing more than its peers, or in a pool whose every host fails.
func failing(p view.Pool, h view.Host) bool {
	return h.State != view.Healthy || (h.Verdict.Level != "" && h.Verdict.Level != view.LevelOK) || p.Failing
}

// poolDown reports whether a pool cannot serve its routes: no host in
// rotation, or every host failing. A route on it that answers by a
// degraded path does so because of the pool's hosts; a route that answers
// stale copies while its pool has hosts does so for reasons of its own
// (its requests fail on them).
func poolDown(p view.Pool) bool {
	return p.Empty || p.Failing || p.Panic || (len(p.Hosts) > 0 && p.Available == 0)
}

// hostsExplain reports whether the failing hosts of r's pool explain what
// r's clients get: the pool cannot serve, or every host of it is failing.
// Then a degraded answer, a share of 5xx, failures on every host tried are
// the hosts' doing, shown beneath them. While some host of the pool is
// fine, they are the route's own (its backends' 5xx, stale copies hiding
// its origin's errors).
func (d *diagnosis) hostsExplain(r view.Route) bool {
	p, ok := d.pools[r.Pool]
	if !ok || !d.failingPools[r.Pool] {
		return false
	}
	if poolDown(p) {
		return true
	}
	for _, h := range p.Hosts {
		if !failing(p, h) {
			return false
		}
	}
	return true
}

type entry struct {
	pool view.Pool
	host view.Host
}

func (d *diagnosis) hosts() {
	byAddr := map[string][]entry{}
	var order []string
	d.failingPools = map[string]bool{}
	for _, p := range d.st.Pools {
		for _, h := range p.Hosts {
			if !failing(p, h) {
				continue
			}
			if byAddr[h.Addr] == nil {
				order = append(order, h.Addr)
			}
			byAddr[h.Addr] = append(byAddr[h.Addr], entry{p, h})
			d.failingPools[p.Name] = true
		}
	}
	d.covered = map[string]bool{}
	for _, addr := range order {
		d.out = append(d.out, d.hostProblem(addr, byAddr[addr]))
	}
}

func (d *diagnosis) hostProblem(addr string, es []entry) view.Problem {
	worst := es[0]
	for _, e := range es[1:] {
		r, w := stateRank[e.host.State], stateRank[worst.host.State]
		if r > w || (r == w && e.pool.Failing && !worst.pool.Failing) {
			worst = e
		}
	}
	h := worst.host
	name := addr
	if h.Name != "" {
		name += " (" + h.Name + ")"
	}
	p := view.Problem{Kind: "host", Subject: addr, Level: view.LevelWarning}
	switch {
	case h.State == view.Healthy && worst.pool.Failing:
		p.Title = "Host " + name + " fails every request"
		p.Why = "Every host of pool " + worst.pool.Name + " fails every request, so sturdy answers from the empty-pool chain at once and sends each host a trial request now and then."
		if k := classify(h.Evidence + " " + h.Reason); k.what != "" {
			p.Why += " This one: " + k.what + ". " + k.check
		}
		p.Detail = h.Evidence
		p.Since = worst.pool.FailingSince
	case h.State == view.Healthy:
		p.Title = "Host " + name + " fails more than its peers"
		p.Why = "More of its requests fail, and are taken as its own, than its peers'; it is still in rotation. Check its logs."
		p.Detail = h.Verdict.Reason
	case h.State == view.Drained || h.State == view.Maintenance:
		p.Level = view.LevelInfo
		p.Title = "Host " + name + " is " + map[string]string{view.Drained: "drained", view.Maintenance: "in maintenance"}[h.State]
		p.Why = "An operator took it out of rotation" + map[string]string{view.Drained: " (requests in flight finish)", view.Maintenance: " and paused its health checks"}[h.State] +
			". POST /api/hosts/" + worst.pool.Name + "/" + addr + "/ready returns it."
		p.Detail = h.Reason
	default:
		p.Title = "Host " + name + " is " + h.State
		p.Why = hostWhy(worst.pool, h)
		p.Detail = hostDetail(h)
		if h.State == view.Suspect && worst.pool.ActiveCheck != "" {
			p.Level = view.LevelInfo // its probe decides within a second or so
		}
	}
	for _, e := range es {
		if e.host.State == view.Healthy {
			continue
		}
		if p.Since.IsZero() || e.host.Since.Before(p.Since) {
			p.Since = e.host.Since
		}
	}
	seen := map[string]bool{}
	for _, e := range es {
		pl := e.pool
		p.Affects = append(p.Affects, poolAffected(pl, e.host))
		for _, r := range d.routesOf[pl.Name] {
			if seen[r.Name] {
				continue
			}
			seen[r.Name] = true
			a := d.routeAffected(r)
			if a.Level == view.LevelCritical {
				p.Level = view.LevelCritical
			}
			p.Affects = append(p.Affects, a)
		}
	}
	return p
}

// poolAffected is a pool's line under one of its failing hosts.
func poolAffected(p view.Pool, h view.Host) view.Affected {
	a := view.Affected{Kind: "pool", Name: p.Name, Level: view.LevelOK}
	n := len(p.Hosts)
	switch {
	case p.Failing:
		a.Level, a.What = view.LevelCritical, "every host fails every request; one trial request per host now and then"
	case p.Empty && p.Panic:
		a.Level, a.What = view.LevelCritical, fmt.Sprintf("no host left of %d: trying the ejected ones anyway (panic mode)", n)
	case p.Empty || p.Available == 0:
		a.Level, a.What = view.LevelCritical, fmt.Sprintf("no host left of %d", n)
	default:
		a.What = fmt.Sprintf("%d of %d hosts in rotation", p.Available, n)
		if p.Available < n {
			a.Level = view.LevelWarning
		}
	}
	if h.State != view.Healthy {
		a.What = "here " + h.State + "; " + a.What
	}
	return a
}

// routeAffected is a route's line under a failing host of its pool.
func (d *diagnosis) routeAffected(r view.Route) view.Affected {
	a := view.Affected{Kind: "route", Name: r.Name, Level: view.LevelOK, What: "clients served as usual"}
	explained := d.hostsExplain(r)
	switch {
	case degraded(r) && explained:
		a.Level, a.What = view.LevelCritical, serving(r)
		if reason := view.NotReadyRoute(r, d.st.Pools); d.notReady(reason) {
			d.covered[reason] = true
			a.What += "; /readyz answers 503"
		}
	case degraded(r):
		a.Level, a.What = view.LevelWarning, serving(r)+" for reasons of its own (listed apart)"
	}
	if v := r.Verdict; v.Level == view.LevelCritical || v.Level == view.LevelWarning {
		what := fmt.Sprintf("%s of its answers 5xx in the last %s", view.Percent(r.Recent.ErrorRatio), window(r.Recent.Seconds))
		switch {
		case !explained:
			what += " (listed apart)"
		case levelRank[v.Level] > levelRank[a.Level]:
			a.Level = v.Level
		}
		if a.What == "clients served as usual" {
			a.What = what
		} else {
			a.What += "; " + what
		}
	}
	return a
}

func (d *diagnosis) notReady(reason string) bool {
	for _, r := range d.st.NotReady {
		if r == reason {
			return true
		}
	}
	return false
}

// routes adds the routes whose trouble no failing host explains
// (hostsExplain): a route failing its clients while some host of its pool
// is fine (the backends' own 5xx, one slow path), answering stale copies
// that hide its origin's errors, or answering by a degraded path with no
// host to blame (a pool with no hosts).
func (d *diagnosis) routes() {
	for _, r := range d.st.Routes {
		if d.hostsExplain(r) {
			continue // beneath its hosts
		}
		pl, known := d.pools[r.Pool]
		v := r.Verdict
		bad := v.Level == view.LevelCritical || v.Level == view.LevelWarning
		if !bad && !r.Degraded && !degraded(r) {
			continue
		}
		p := view.Problem{Kind: "route", Subject: r.Name, Level: view.LevelWarning}
		var why []string
		switch {
		case degraded(r):
			p.Level, p.Title, p.Since = view.LevelCritical, "Route "+r.Name+" "+serving(r), r.ServingSince
			switch {
			case r.Serving == view.ServingStale && (!known || !poolDown(pl)):
				why = append(why, fmt.Sprintf("Its requests fail on the backends (%d origin errors so far, %d hidden by stale copies), and the cache answers with copies older than their freshness. Check what the backends answer on this route.", r.OriginErrors, r.HiddenErrors))
			default:
				why = append(why, "Pool "+r.Pool+" cannot answer, though no host of it is marked out. Check its backends.")
			}
			if reason := view.NotReadyRoute(r, d.st.Pools); d.notReady(reason) {
				d.covered[reason] = true
				p.Affects = append(p.Affects, view.Affected{Kind: "route", Name: r.Name, Level: view.LevelCritical, What: "/readyz answers 503"})
			}
		case v.Level == view.LevelCritical:
			p.Level, p.Title = view.LevelCritical, "Route "+r.Name+" is failing its clients"
		case bad:
			p.Title = "Route " + r.Name + " answers more errors than usual"
		default:
			p.Title, p.Since = "Route "+r.Name+" fails on every host", r.DegradedSince
		}
		if bad {
			why = append(why, "Its clients got "+view.Percent(r.Recent.ErrorRatio)+" 5xx answers in the last "+window(r.Recent.Seconds)+".")
			p.Detail = v.Reason
		}
		if r.Degraded {
			why = append(why, "Its failures are the route's own, not any host's: they happen on every host it tried ("+
				routeWords(r.DegradedReason)+"). Check what this route's requests do on the backend, or its timeouts.")
			p.Detail = strings.TrimPrefix(p.Detail+"; "+r.DegradedReason, "; ")
		}
		if known {
			if d.failingPools[r.Pool] {
				why = append(why, "Pool "+r.Pool+" has hosts out too (listed apart).")
			}
			p.Affects = append(p.Affects, poolAffected(pl, view.Host{State: view.Healthy}))
		}
		p.Why = strings.Join(why, " ")
		d.out = append(d.out, p)
	}
}

// routeWords words a route's degraded reason (e.g. "response_timeout on
// 2 hosts").
func routeWords(reason string) string {
	if k := classify(reason); k.what != "" {
		return k.what
	}
	return reason
}

// process adds the causes that are sturdy's own: shutting down,
// readiness reasons no other problem shows, certificates, name lookups,
// a refused reload, webhooks, attributed clients.
func (d *diagnosis) process() {
	st := d.st
	if st.Draining {
		d.covered[view.NotReadyDraining] = true
		d.out = append(d.out, view.Problem{Level: view.LevelWarning, Kind: "process", Subject: "sturdy", Title: "Shutting down",
			Why: "Requests in flight are finishing; /readyz answers 503 so that load balancers send no new ones."})
	}
	for _, c := range st.Certificates {
		p := view.Problem{Kind: "certificate", Subject: c.Listener + " " + c.Names, Detail: "listener " + c.Listener + " (" + c.Source + "), valid until " + c.NotAfter.UTC().Format(time.RFC3339)}
		switch c.State {
		case view.CertExpired:
			p.Level, p.Title, p.Since = view.LevelCritical, "Certificate expired: "+c.Names, c.NotAfter
			p.Why = "Clients refuse the connection. Replace the certificate" + map[bool]string{true: "; its ACME renewal failed, see the log", false: " and reload"}[c.Source == "acme"] + "."
			if reason := view.NotReadyCertificate(c); d.notReady(reason) {
				d.covered[reason] = true
				p.Affects = append(p.Affects, view.Affected{Kind: "listener", Name: c.Listener, Level: view.LevelCritical, What: "/readyz answers 503"})
			}
		case view.CertExpiring:
			p.Level, p.Title = view.LevelWarning, "Certificate expiring: "+c.Names
			p.Why = map[bool]string{true: "Its ACME renewal is late; see the log for why.", false: "Replace it before it expires, then reload."}[c.Source == "acme"]
		default:
			continue
		}
		d.out = append(d.out, p)
	}
	for _, r := range st.NotReady {
		if !d.covered[r] {
			d.out = append(d.out, view.Problem{Level: view.LevelCritical, Kind: "readiness", Subject: r, Title: "Not ready",
				Why: upperFirst(r) + ". /readyz answers 503, so load balancers send no new clients."})
		}
	}
	for _, n := range st.DNS {
		if !n.Failing {
			continue
		}
		p := view.Problem{Level: view.LevelWarning, Kind: "dns", Subject: n.Name, Title: "Name " + n.Name + " does not resolve",
			Why: "Its lookups fail; its hosts keep their last good addresses. Check the name and the resolver.", Detail: n.LastError}
		if n.Expired {
			p.Level, p.Why = view.LevelCritical, "Its lookups have failed for longer than dns.hold: it has no addresses left. Check the name and the resolver."
		}
		d.out = append(d.out, p)
	}
	if rl := st.Reloads; rl.LastErr != "" {
		d.out = append(d.out, view.Problem{Level: view.LevelWarning, Kind: "reload", Subject: "config", Title: "Last config reload refused",
			Why: "The running config keeps serving. Fix the file (sturdy check names the line) and reload.", Detail: rl.LastErr, Since: rl.Last})
	}
	for _, w := range st.Webhooks {
		if w.LastError == "" {
			continue
		}
		why := "Its deliveries fail: alerts do not reach it."
		if k := classify(w.LastError); k.what != "" {
			why += " The receiver: " + k.what + ". Check the webhook's URL and the receiver."
		}
		d.out = append(d.out, view.Problem{Level: view.LevelWarning, Kind: "webhook", Subject: w.Name, Title: "Webhook " + w.Name + " failing",
			Why: why, Detail: w.LastError, Since: w.LastErrorTime})
	}
	if cs := st.Clients; len(cs) > 0 {
		shed := 0
		for _, c := range cs {
			if c.Shed {
				shed++
			}
		}
		d.out = append(d.out, view.Problem{Level: view.LevelInfo, Kind: "clients", Subject: "clients",
			Title: fmt.Sprintf("%d %s attributed", len(cs), map[bool]string{true: "client", false: "clients"}[len(cs) == 1]),
			Why:   fmt.Sprintf("Their failures are their own, not the hosts'; %d shed. See Attributed clients below.", shed)})
	}
}

// window names the span of a route's recent counts: a minute, less right
// after a start.
func window(seconds float64) string {
	if seconds == 0 || seconds >= 55 {
		return "minute"
	}
	return fmt.Sprintf("%.0fs", seconds)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
