package server

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// The differential property of the normalised path, through the real
// server on both front ends: for any request target T,
//
//   - on the open listeners, T takes route R and the backend gets P; sent
//     as P, the request takes R again and the backend gets P again (P is
//     the path judged, and a fixed point);
//   - on the guarded listeners, T and P get the same answer: the access
//     decision about the target is the decision about what the backend
//     receives;
//   - both front ends decide alike.
//
// FuzzPathDecision explores it (go test -fuzz FuzzPathDecision
// ./internal/server); TestPathDecisionGenerated runs its seeds and a
// fixed-seed mixture in every go test run.

// pathSeeds are the seed corpus: the spellings of protected paths, with
// path parameters, backslashes, encodings and the absolute form.
func pathSeeds() []string {
	seeds := []string{
		"/", "/admin", "/admin/", "/admin/x", "/staff/x?q=1", "/fa/private/x", "/fa/open/x",
		"/admin;x/y", "/site/..;/admin/x", "/admin/..;/x", "/a\\admin/x", "/%5cadmin/x", "/admin%2Fx",
		"/%61dmin/x", "/%2561dmin/x", "/adm%69n/x", "/%7Estaff/x", "/ADMIN/x", "/admin%20/x",
		"/x/..", "/x/../..", "/..", "/.", "/%2e%2e", "/x/%2e%2e%2fadmin", "/x?y=//admin/../z",
		"http://site.test", "http://site.test/", "http://site.test//fa//private/x", "http://site.test/%2e%2e//admin/x",
		"/caf\xc3\xa9//admin/x", "/x#/../admin/y", "/x/%", "/x/%zz",
	}
	for _, p := range []string{"admin", "staff", "fa/private"} {
		for _, sp := range spellings {
			seeds = append(seeds, strings.Replace(sp, "P", p, 1))
		}
	}
	return seeds
}

// pathParts are what generated targets are made of.
var pathParts = []string{
	"/", "/", "/", "//", ".", "..", "%2e", "%2E", "%2e%2e", ";", ";v=1", "\\", "%5C", "%2F", "%2f",
	"admin", "admin", "staff", "fa", "private", "open", "x", "%61dmin", "st%61ff", "%66a", "%41", "~", "%7e",
	"%25", "%20", "?", "?q=1", "&", "=", "#", "A", "\xc3\xa9", "%",
}

// genTarget makes a target from rnd: parts joined, perhaps in absolute form.
func genTarget(rnd *rand.Rand) string {
	var b strings.Builder
	if rnd.IntN(8) == 0 {
		b.WriteString("http://site.test")
	}
	b.WriteString("/")
	for n := 1 + rnd.IntN(10); n > 0; n-- {
		b.WriteString(pathParts[rnd.IntN(len(pathParts))])
	}
	return b.String()
}

// pathChecker sends targets to a pathSite and checks the property.
type pathChecker struct {
	ps             *pathSite
	open, guard    []*rawClient // native, net/http
	checked, fixed int
}

func newPathChecker(t testing.TB) *pathChecker {
	ps := startPathSite(t)
	pc := &pathChecker{ps: ps}
	for i, ln := range []string{"open-native", "open-nethttp"} {
		pc.open = append(pc.open, ps.client(t, "127.0.31."+string(rune('2'+i)), ln))
	}
	for i, ln := range []string{"guard-native", "guard-nethttp"} {
		pc.guard = append(pc.guard, ps.client(t, "127.0.31."+string(rune('5'+i)), ln))
	}
	return pc
}

// usable reports whether target can be sent as a request line's target:
// no space or control byte (those make another request line, which both
// front ends refuse alike), and a path or an absolute form for site.test
// (the property is the path's: an absolute form naming another, or an
// invalid, host is another request).
func usable(target string) bool {
	if !strings.HasPrefix(target, "/") && !strings.HasPrefix(target, "http://site.test/") && target != "http://site.test" {
		return false
	}
	for i := 0; i < len(target); i++ {
		if c := target[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

func (pc *pathChecker) check(t testing.TB, target string) {
	t.Helper()
	if !usable(target) {
		return
	}
	pc.checked++
	var route, got string
	var status int
	for i, c := range pc.open {
		st, h := c.get(target)
		r, g := h.Get("X-Route"), h.Get("X-Got")
		if i == 0 {
			status, route, got = st, r, g
			continue
		}
		if st != status || r != route || g != got {
			t.Fatalf("GET %q: native %d route %q backend got %q; net/http %d route %q backend got %q", target, status, route, got, st, r, g)
		}
	}
	if status == 0 {
		t.Fatalf("GET %q: no answer", target)
	}
	decide := func(tg string) (int, int) {
		a, _ := pc.guard[0].get(tg)
		b, _ := pc.guard[1].get(tg)
		return a, b
	}
	ga, gb := decide(target)
	if ga != gb {
		t.Fatalf("GET %q on the guarded listeners: native %d, net/http %d", target, ga, gb)
	}
	if status != 200 {
		// Refused before any route (400 at the edge): refused alike
		// whatever the route's access rules.
		if ga != status {
			t.Fatalf("GET %q: %d on the open listeners, %d on the guarded ones", target, status, ga)
		}
		return
	}
	pc.fixed++
	// got is what the backend received: the path judged. Sent as such,
	// it takes the same route, reaches the backend unchanged, and gets
	// the same access decision.
	st, h := pc.open[pc.fixed%2].get(got)
	if st != 200 || h.Get("X-Route") != route || h.Get("X-Got") != got {
		t.Fatalf("GET %q took route %q and the backend got %q; GET %q then: %d, route %q, backend got %q", target, route, got, got, st, h.Get("X-Route"), h.Get("X-Got"))
	}
	pa, pb := decide(got)
	if pa != ga || pb != gb {
		t.Fatalf("GET %q is answered %d on the guarded listeners, GET %q (what the backend got) %d/%d: the rule judged another path than the one served", target, ga, got, pa, pb)
	}
}

func FuzzPathDecision(f *testing.F) {
	for _, s := range pathSeeds() {
		f.Add(s)
	}
	pc := newPathChecker(f)
	f.Fuzz(func(t *testing.T, target string) {
		for _, c := range append(pc.open, pc.guard...) {
			c.t = t
		}
		pc.check(t, target)
	})
}

// The seed corpus and a fixed-seed mixture of generated targets: the
// bounded run of FuzzPathDecision that every go test makes (fewer under
// -short).
func TestPathDecisionGenerated(t *testing.T) {
	t.Parallel()
	pc := newPathChecker(t)
	for _, s := range pathSeeds() {
		pc.check(t, s)
	}
	n := 2000
	if testing.Short() {
		n = 300
	}
	rnd := rand.New(rand.NewPCG(30, 1))
	for range n {
		pc.check(t, genTarget(rnd))
	}
	t.Logf("%d targets checked, %d of them served (then sent again as the backend got them)", pc.checked, pc.fixed)
}
