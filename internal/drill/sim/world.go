package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Class is who owns a failure: the party sturdy must name, and the only
// one it may act against.
type Class string

// The owners of design.md's health model.
const (
	ClassHost    Class = "host"
	ClassClient  Class = "client"
	ClassRequest Class = "request"
	ClassRoute   Class = "route"
	ClassSturdy  Class = "sturdy"
)

// Classes lists the owner classes in the order tables show them.
var Classes = []Class{ClassHost, ClassClient, ClassRequest, ClassRoute, ClassSturdy}

// Kind is one way of failing, with a true owner.
type Kind string

// The faults a run draws from.
const (
	HostReset Kind = "host_reset" // resets connections, probe included
	HostHang  Kind = "host_hang"  // never answers, probe included
	Host5xx   Kind = "host_5xx"   // answers 502, probe included
	HostGray  Kind = "host_gray"  // probe passes, traffic gets 502
	HostShed  Kind = "host_shed"  // probe passes, excess gets 503 + Retry-After: full, not broken
	// HostCloses closes its connection after every answer without
	// saying so: healthy, and the right answer is to serve through it.
	HostCloses Kind = "host_closes"
	ClientScan Kind = "client_scan"
	// ClientMalformed sends bodies whose framing lies (bad chunking, a
	// length longer than the body).
	ClientMalformed Kind = "client_malformed"
	ClientStall     Kind = "client_stall"  // stops sending its body half-way
	ClientHangup    Kind = "client_hangup" // leaves before the answer
	RouteSlow       Kind = "route_slow"    // the route (its endpoint, e.g. /report) is slow on every host
	RouteFailing    Kind = "route_failing" // the route fails on every host
	RequestKill     Kind = "request_kill"  // kills whatever serves it (incident 003)
	SturdyFDs       Kind = "sturdy_fds"    // sturdy out of file descriptors
)

// Kinds lists every fault kind in the order tables show them. A world
// draws its faults from this list by index: a kind added re-draws every
// seed's world (then renew testdata/regressions.txt and the figures).
var Kinds = []Kind{HostReset, HostHang, Host5xx, HostGray, HostShed, HostCloses,
	ClientScan, ClientMalformed, ClientStall, ClientHangup,
	RouteSlow, RouteFailing, RequestKill, SturdyFDs}

// Owner is the class that owns a kind of fault.
func (k Kind) Owner() Class {
	switch k {
	case HostReset, HostHang, Host5xx, HostGray, HostShed, HostCloses:
		return ClassHost
	case ClientScan, ClientMalformed, ClientStall, ClientHangup:
		return ClassClient
	case RouteSlow, RouteFailing:
		return ClassRoute
	case RequestKill:
		return ClassRequest
	}
	return ClassSturdy
}

// acted reports whether the right answer to the kind is an action against
// its owner: a shedding host is full, not broken, and must stay in; so
// must a host that closes its connections after every answer.
func (k Kind) acted() bool { return k != HostShed && k != HostCloses }

// Fault is one fault of a run with its true owner.
type Fault struct {
	Kind Kind
	// Owner names the owner as sturdy would: a host's address, a client's
	// IP, a route's name, a request's path, "sturdy".
	Owner string
	// Index is the host's, client's or route's index in the world.
	Index      int
	Start, End time.Duration // since the run began
	// Rate is the share of the owner's requests that fail (host faults,
	// sturdy's dials and accepts), or the requests per second a faulty
	// client sends, or the share of innocents' requests that are the
	// killing request.
	Rate float64
	// Reset: the scanner's WAF resets instead of answering 502.
	Reset bool
}

func (f Fault) activeAt(t time.Duration) bool { return t >= f.Start && t < f.End }

func (f Fault) String() string {
	return fmt.Sprintf("%s(%s) %v-%v rate %.2f", f.Kind, f.Owner, f.Start, f.End, f.Rate)
}

// World is everything a run is made of, drawn from its seed.
type World struct {
	Seed     uint64
	Hosts    []string // addresses, "ip:port" once listening
	HostIPs  []string
	Clients  []string  // innocent clients' IPs
	Rates    []float64 // each innocent's requests per second
	Routes   int       // routes r0 (the default), r1, ...
	Active   bool      // the pool has active checks
	Duration time.Duration
	Faults   []Fault
}

// Shape bounds what a world may draw.
type Shape struct {
	Duration time.Duration // of a run; default 30s
	Kinds    []Kind        // to draw faults from; default all
	// MaxFaults is the most faults in a run (default 3); at least one.
	MaxFaults int
}

// Draw derives a world from seed alone (math/rand/v2's PCG): the same
// seed gives the same hosts, clients, routes and faults on every machine.
func Draw(seed uint64, sh Shape) World {
	if sh.Duration <= 0 {
		sh.Duration = 30 * time.Second
	}
	if len(sh.Kinds) == 0 {
		sh.Kinds = Kinds
	}
	if sh.MaxFaults <= 0 {
		sh.MaxFaults = 3
	}
	r := rand.New(rand.NewPCG(seed, 0x5eed5eed))
	w := World{Seed: seed, Duration: sh.Duration, Routes: 1 + r.IntN(3), Active: r.IntN(2) == 0}
	nh := 2 + r.IntN(4)
	for i := range nh {
		w.HostIPs = append(w.HostIPs, fmt.Sprintf("127.1.0.%d", i+1))
	}
	w.Hosts = slices.Clone(w.HostIPs)
	nc := 3 + r.IntN(6)
	for i := range nc {
		w.Clients = append(w.Clients, fmt.Sprintf("127.0.1.%d", i+1))
		w.Rates = append(w.Rates, 2+6*r.Float64())
	}
	n := 1 + r.IntN(sh.MaxFaults)
	usedHost := map[int]bool{}
	usedRoute := map[int]bool{}
	var sturdy bool
	faultyClients := 0
	for tries := 0; len(w.Faults) < n && tries < 50; tries++ {
		k := sh.Kinds[r.IntN(len(sh.Kinds))]
		// Long enough to be named within the 10 s bound, overlapping
		// as the draw falls.
		start := time.Duration(1+r.IntN(int(sh.Duration/time.Second)/2-1)) * time.Second
		length := 12*time.Second + time.Duration(r.Int64N(int64(sh.Duration-start-12*time.Second-2*time.Second)+1))
		f := Fault{Kind: k, Start: start, End: start + length}
		switch k.Owner() {
		case ClassHost:
			// Passive evidence may eject half the pool at most: more
			// failing hosts than that are a different story (a majority
			// failure), not attribution.
			if len(usedHost)+1 > nh/2 || k == HostGray && !w.Active {
				continue
			}
			f.Index = r.IntN(nh)
			for usedHost[f.Index] {
				f.Index = (f.Index + 1) % nh
			}
			usedHost[f.Index] = true
			f.Owner = w.HostIPs[f.Index]
			f.Rate = 0.7 + 0.3*r.Float64()
			if k == HostShed {
				f.Rate = 0.3 + 0.4*r.Float64()
			}
		case ClassClient:
			faultyClients++
			f.Index = faultyClients - 1
			f.Owner = fmt.Sprintf("127.0.2.%d", faultyClients)
			f.Rate = 1 + 4*r.Float64()
			if k == ClientScan {
				f.Rate = 5 + 25*r.Float64()
				f.Reset = r.IntN(2) == 0
			}
		case ClassRoute:
			// A route is judged against the others on the same hosts:
			// one at least stays healthy.
			if len(usedRoute)+1 >= w.Routes {
				continue
			}
			f.Index = r.IntN(w.Routes)
			for usedRoute[f.Index] {
				f.Index = (f.Index + 1) % w.Routes
			}
			usedRoute[f.Index] = true
			f.Owner = routeName(f.Index)
		case ClassRequest:
			f.Index = r.IntN(w.Routes)
			f.Owner = fmt.Sprintf("/%s/item/kill-%d", routeName(f.Index), len(w.Faults))
			f.Rate = 0.05 + 0.15*r.Float64()
		case ClassSturdy:
			if sturdy {
				continue
			}
			sturdy = true
			f.Owner = "sturdy"
			f.Rate = 0.3 + 0.5*r.Float64()
		}
		w.Faults = append(w.Faults, f)
	}
	return w
}

func routeName(i int) string { return fmt.Sprintf("r%d", i) }

// String is the world in one line per part, for a failing run's log.
func (w World) String() string {
	s := fmt.Sprintf("seed %d: %d hosts, %d innocent clients, %d routes, active checks %v, %v\n", w.Seed, len(w.Hosts), len(w.Clients), w.Routes, w.Active, w.Duration)
	for _, f := range w.Faults {
		s += "  " + f.String() + "\n"
	}
	return s
}

// faultsAt returns the faults of kinds active at t.
func (w *World) faultsAt(t time.Duration, owner Class) []*Fault {
	var out []*Fault
	for i := range w.Faults {
		if f := &w.Faults[i]; f.Kind.Owner() == owner && f.activeAt(t) {
			out = append(out, f)
		}
	}
	return out
}
