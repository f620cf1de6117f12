package health

import (
	"crypto/tls"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/health/balance"
)

// PoolConfig is one pool as the compile step hands it over: every string
// parsed, every file read.
type PoolConfig struct {
	Name string
	// Balance is a balance policy name (balance.RoundRobin, ...).
	Balance string
	Hosts   []HostSpec
	// Scheme is how hosts are spoken to: "http" or "https".
	Scheme string
	// TLS is the client config for an https pool (probes use it too).
	TLS *tls.Config
	// Protocol is how probes speak to the hosts: "" or "http1", "h2"
	// (HTTP/2 over TLS), "h2c" (HTTP/2 with prior knowledge).
	Protocol string
	// MaxInFlight caps requests in flight per host (a connection limit
	// for HTTP/1.1 upstreams); a host at its cap is skipped. 0: no cap.
	MaxInFlight int64
	// FailStatuses are the 5xx statuses that count as failed attempts.
	FailStatuses []int
	Passive      Passive
	// Probe is the active readiness check; nil means none.
	Probe *Probe
	// Unresolved marks a pool that has no hosts by design (config.Pool's
	// Unresolved): its emptiness is no episode and raises no event.
	Unresolved bool
	// Cut, when set, ends the requests waiting for a response from the
	// host at addr (with an error the proxy tells apart): the health model
	// calls it when a probe marks a host down and when the pool is found
	// failing, so that nobody waits for a timeout on a host known dead.
	Cut func(addr string)
}

// HostSpec is one configured host.
type HostSpec struct {
	// Addr is the host as configured (host:port or unix:/path), or an IP
	// address and port when the host came from a DNS name.
	Addr string
	// Target is what requests are sent to (see resolve.Target); "" means
	// Addr.
	Target string
	// Name is the name:port the address came from, "" when the host was
	// configured by address.
	Name   string
	Weight int
	// Backup hosts take requests only while no other host is healthy (an
	// SRV record of a later priority).
	Backup bool
}

// Probe is an active readiness check, parsed.
type Probe struct {
	Method, Path, Host string
	// ExpectLo and ExpectHi bound the passing statuses; Expect is how the
	// range was written, for people.
	ExpectLo, ExpectHi int
	Expect             string
	// ExpectBody, when set, must appear in the first 64 KiB of the body.
	ExpectBody                     string
	Interval, FastInterval, Jitter time.Duration
	Timeout                        time.Duration
	Rise, Fall                     int
	// GRPC makes the probe a grpc.health.v1 Check of GRPCService
	// (grpccheck.go) instead of an HTTP request.
	GRPC        bool
	GRPCService string
}

// Pool is one compiled pool: its hosts, its balancing over those in
// rotation, and its health model. The proxy asks it which host to try
// (Next, Panic) and tells it what happened (Record, Settle); everything
// else about host health happens in this package.
type Pool struct {
	Name  string
	Hosts []*Host
	// Scheme is "http" or "https"; TLS the client config for https.
	Scheme      string
	TLS         *tls.Config
	MaxInFlight int64

	m      *Monitor
	attr   *Attributing
	cfg    PoolConfig
	failOn [100]bool // failOn[s-500] for 5xx statuses that count as failures
	shared *poolShared
	rot    atomic.Pointer[rotation]
}

// rotation is the hosts in rotation, in tiers, each with a policy built
// over its hosts, as of one version of the pool's modes. A request goes to
// the first tier that has a host for it: healthy hosts first, then backup
// hosts, and hosts under suspicion (failing, kept in rotation by
// max_ejected, or waiting for their probe) only as a last resort.
type rotation struct {
	version uint64
	tiers   [numTiers]tier
}

type tier struct {
	hosts  []*Host
	policy *balance.Policy
}

const (
	tierHealthy = iota
	tierBackup
	tierSuspect
	numTiers
)

func tierOf(h *Host) int {
	switch {
	case h.Mode() == Suspect:
		return tierSuspect
	case h.Backup:
		return tierBackup
	}
	return tierHealthy
}

// poolShared is the part of a pool's health that outlives reloads.
type poolShared struct {
	// version moves whenever a host enters or leaves rotation; each
	// compiled Pool rebuilds its rotation when it sees a new one.
	version      atomic.Uint64
	panic        atomic.Bool
	empty        atomic.Bool
	failing      atomic.Bool  // every host fails everything (see failing.go)
	failingSince atomic.Int64 // unix nanos
	failMu       sync.Mutex   // one look at whether the pool is failing at a time (failing.go)
	mu           sync.Mutex   // guards emptySince, emptyTotal
	emptySince   time.Time
	emptyTotal   time.Duration
	budget       Budget
	panicAnswers atomic.Uint64
	episode      [numBy]atomic.Uint64 // answers by other means while empty
	ejectMu      sync.Mutex           // makes "count the ejected, eject one more" one step
	trackMu      sync.Mutex           // serialises trackEmpty; guards lastTrack
	lastTrack    time.Time
}

func (s *poolShared) rotationChanged() { s.version.Add(1) }

// NewPool compiles a pool. Hosts that prev (the previous config's pool of
// the same name, or nil) also had keep their state, and the pool keeps its
// retry budget and empty-pool episode. Nothing live changes: a pool that is
// never used leaves no trace.
func NewPool(m *Monitor, attr *Attributing, cfg PoolConfig, prev *Pool) (*Pool, error) {
	p := &Pool{
		Name: cfg.Name, Scheme: cfg.Scheme, TLS: cfg.TLS, MaxInFlight: cfg.MaxInFlight,
		m: m, attr: attr, cfg: cfg,
	}
	if p.Scheme == "" {
		p.Scheme = "http"
	}
	if prev != nil && prev.Name == cfg.Name {
		p.shared = prev.shared
	} else {
		p.shared = new(poolShared)
	}
	for _, s := range cfg.FailStatuses {
		if s >= 500 && s < 600 {
			p.failOn[s-500] = true
		}
	}
	p.Hosts = make([]*Host, len(cfg.Hosts))
	for i, hs := range cfg.Hosts {
		var st *hostState
		if prev != nil && prev.shared == p.shared {
			for _, o := range prev.Hosts {
				if o.Addr == hs.Addr {
					st = o.hostState
				}
			}
		}
		if st == nil {
			now := time.Now()
			// A host is in its first state since it was compiled in, not
			// since the zero time (issue 36: /api/status showed year 1).
			st = &hostState{pool: p.shared, since: now}
			st.window.SetSpan(cfg.Passive.Window)
			st.quietSince.Store(now.UnixNano()) // no success yet, since now
		}
		target := hs.Target
		if target == "" {
			target = hs.Addr
		}
		p.Hosts[i] = &Host{Addr: hs.Addr, Target: target, Name: hs.Name, Weight: max(hs.Weight, 1), Backup: hs.Backup, index: i, hostState: st}
	}
	if _, err := p.rebuild(p.shared.version.Load()); err != nil {
		return nil, fmt.Errorf("pool %s: %w", cfg.Name, err)
	}
	return p, nil
}

// adopt makes the pool's settings live on state it shares with the
// previous config: windows of kept hosts take the new span. The monitor
// calls it once the config serves.
func (p *Pool) adopt() {
	for _, h := range p.Hosts {
		h.window.SetSpan(p.cfg.Passive.Window)
	}
}

func (p *Pool) rotation() *rotation {
	r := p.rot.Load()
	if v := p.shared.version.Load(); r.version != v {
		r, _ = p.rebuild(v) // the policy name was accepted when the pool was built
	}
	return r
}

// rebuild builds the rotation for version v. Modes are read after v, so a
// transition that races with the scan moves the version on and the next
// request rebuilds again.
func (p *Pool) rebuild(v uint64) (*rotation, error) {
	r := &rotation{version: v}
	var members [numTiers][]balance.Member
	for _, h := range p.Hosts {
		if h.Mode().InRotation() {
			t := tierOf(h)
			r.tiers[t].hosts = append(r.tiers[t].hosts, h)
			members[t] = append(members[t], balance.Member{Key: h.Addr, Weight: h.Weight})
		}
	}
	for t := range r.tiers {
		pol, err := balance.New(p.cfg.Balance, members[t])
		if err != nil {
			return nil, err
		}
		r.tiers[t].policy = pol
	}
	p.rot.Store(r)
	return r, nil
}

// Next returns the host to try for a request that has tried the hosts in
// tried: the policy's choice among the hosts in rotation, under their
// connection cap, slow start permitting, healthy hosts before the others;
// nil when none is left. key feeds hash balancing.
func (p *Pool) Next(key uint64, tried *balance.Tried, now time.Time) *Host {
	ns := now.UnixNano()
	if p.shared.failing.Load() {
		return p.trial(tried, ns)
	}
	r := p.rotation()
	free := func(h *Host) bool {
		return !tried.Has(h.index) && (p.MaxInFlight == 0 || h.InFlight() < p.MaxInFlight) && h.shedAllows(ns) && h.Mode().InRotation()
	}
	for t := range r.tiers {
		tr := &r.tiers[t]
		if len(tr.hosts) == 0 {
			continue
		}
		// A host that shed load said when to come back: until then it
		// takes only what its peers cannot (within its cap). Its cap alone
		// is no back-off when it sheds with one request in flight: held to
		// one, it kept its whole share, and refused half of it.
		held := false
		load := func(i int) int64 { return tr.hosts[i].InFlight() }
		i := tr.policy.Pick(key, func(i int) bool {
			h := tr.hosts[i]
			if h.shedHeld(ns) {
				held = true
				return false
			}
			return free(h) && h.slowStartAllows(ns)
		}, load)
		if i < 0 && held {
			i = tr.policy.Pick(key, func(i int) bool { h := tr.hosts[i]; return free(h) && h.slowStartAllows(ns) }, load)
		}
		if i >= 0 {
			return tr.hosts[i]
		}
	}
	// Slow start only shifts load to peers; with no peer to take it, a
	// host in slow start takes the request.
	for t := range r.tiers {
		for _, h := range r.tiers[t].hosts {
			if free(h) {
				return h
			}
		}
	}
	return nil
}

// Panic returns the host to try when no host is in rotation but some are
// out on passive evidence only (ejected): the one that failed least
// recently, not yet tried, and announces panic routing once. It returns nil
// when every host is out for a reason passive routing must respect (down
// by active checks, drained, maintenance).
func (p *Pool) Panic(tried *balance.Tried) *Host {
	var best *Host
	for _, h := range p.Hosts {
		if tried.Has(h.index) || h.Mode() != Ejected {
			continue
		}
		if best == nil || h.lastFailure.Load() < best.lastFailure.Load() {
			best = h
		}
	}
	if best == nil {
		return nil
	}
	p.shared.panicAnswers.Add(1)
	if p.shared.panic.CompareAndSwap(false, true) {
		p.m.emit(event.Event{
			Type: event.PanicEntered, Severity: event.Critical, Pool: p.Name,
			Message:  "every host of the pool is out on passive evidence; trying them anyway (panic routing)",
			Evidence: map[string]any{"hosts": len(p.Hosts)},
		})
	}
	return best
}

// Budget is the pool's retry budget, shared across reloads.
func (p *Pool) Budget() *Budget { return &p.shared.budget }

// FailStatus reports whether a response status counts as a failed attempt.
func (p *Pool) FailStatus(status int) bool {
	return status >= 500 && status < 600 && p.failOn[status-500]
}

// HasActiveChecks reports whether the pool probes its hosts.
func (p *Pool) HasActiveChecks() bool { return p.cfg.Probe != nil }

// ActiveCheck describes the pool's probe for people, or "".
func (p *Pool) ActiveCheck() string {
	a := p.cfg.Probe
	if a == nil {
		return ""
	}
	if a.GRPC {
		return fmt.Sprintf("grpc.health.v1 Check %q every %s (expect SERVING)", a.GRPCService, a.Interval)
	}
	return fmt.Sprintf("%s %s every %s (expect %s)", a.Method, a.Path, a.Interval, a.Expect)
}

// Balance is the pool's balance policy name.
func (p *Pool) Balance() string { return p.cfg.Balance }

// AvailableCount is the number of hosts in rotation.
func (p *Pool) AvailableCount() int {
	n := 0
	for _, h := range p.Hosts {
		if h.Mode().InRotation() {
			n++
		}
	}
	return n
}

// InPanic reports whether the pool is panic routing.
func (p *Pool) InPanic() bool { return p.shared.panic.Load() }

// Empty reports whether the pool has no host in rotation, since when, and
// for how long in all it has been empty.
func (p *Pool) Empty() (bool, time.Time, time.Duration) {
	if p == nil {
		return false, time.Time{}, 0
	}
	p.shared.mu.Lock()
	defer p.shared.mu.Unlock()
	total := p.shared.emptyTotal
	if p.shared.empty.Load() {
		total += time.Since(p.shared.emptySince)
	}
	return p.shared.empty.Load(), p.shared.emptySince, total
}

// Ways an empty pool's requests were answered, counted per episode.
const (
	ByFallback = iota
	ByStale
	BySorry
	numBy
)

var byNames = [numBy]string{"fallback", "stale", "sorry"}

// EpisodeAnswer counts a request answered some other way while the pool was
// empty (fallback pool, stale copy, sorry page); the counts go into the
// pool_restored event.
func (p *Pool) EpisodeAnswer(by int) { p.shared.episode[by].Add(1) }

// Host returns the pool's host with address addr, or nil.
func (p *Pool) Host(addr string) *Host {
	for _, h := range p.Hosts {
		if h.Addr == addr {
			return h
		}
	}
	return nil
}
