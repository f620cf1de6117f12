package acl

import (
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/config"
)

func compile(t *testing.T, rules ...config.AccessRule) *List {
	t.Helper()
	l, err := Compile("routes[0].access", rules, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

// nginx's example: deny 192.168.1.1; allow 192.168.1.0/24; allow
// 10.1.1.0/16; allow 2001:0db8::/32; deny all.
func TestNginxExample(t *testing.T) {
	l := compile(t,
		config.AccessRule{Deny: "192.168.1.1"},
		config.AccessRule{Allow: "192.168.1.0/24"},
		config.AccessRule{Allow: "10.1.1.0/16"},
		config.AccessRule{Allow: "2001:0db8::/32"},
		config.AccessRule{Deny: "all"})
	for _, tc := range []struct {
		ip   string
		want Action
	}{
		{"192.168.1.1", Deny}, {"192.168.1.2", Allow}, {"192.168.1.255", Allow}, {"192.168.2.1", Deny},
		{"10.1.200.3", Allow}, {"10.2.0.1", Deny}, {"2001:db8::1", Allow}, {"2001:db9::1", Deny},
		{"::ffff:192.168.1.7", Allow}, // an IPv4-mapped client is its IPv4 address
		{"0.0.0.0", Deny}, {"255.255.255.255", Deny}, {"::", Deny}, {"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Deny},
	} {
		if got := l.Lookup(ip(tc.ip)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.ip, got, tc.want)
		}
	}
	if l.Lookup(netip.Addr{}) != Deny {
		t.Error("deny all must also refuse a request without an IP address")
	}
}

// First match wins, even when a wider rule comes first.
func TestFirstMatchWinsOverMoreSpecificRules(t *testing.T) {
	l := compile(t, config.AccessRule{Allow: "10.0.0.0/8"}, config.AccessRule{Deny: "10.1.2.3"})
	if !l.Allowed(ip("10.1.2.3")) {
		t.Error("the earlier, wider allow must win")
	}
	if l.Lookup(ip("11.0.0.1")) != NoMatch || !l.Allowed(ip("11.0.0.1")) {
		t.Error("an address no rule matches is allowed")
	}
	if l.Lookup(netip.Addr{}) != NoMatch {
		t.Error("no all rule: a request without an address matches nothing")
	}
	v6 := compile(t, config.AccessRule{Deny: "::/0"})
	if !v6.Allowed(ip("192.0.2.1")) {
		t.Error("an IPv6 rule must not match an IPv4 client")
	}
}

func TestFilesAreReadAndErrorsNameFileAndLine(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "office.txt")
	os.WriteFile(good, []byte("# office\n203.0.113.0/24\n\n2001:db8:1::/48 # v6\n198.51.100.7\n"), 0o644)
	l := compile(t, config.AccessRule{AllowFile: good}, config.AccessRule{Deny: "all"})
	if !l.Allowed(ip("203.0.113.9")) || !l.Allowed(ip("2001:db8:1::5")) || !l.Allowed(ip("198.51.100.7")) || l.Allowed(ip("198.51.100.8")) {
		t.Error("file rules not applied")
	}
	if l.Len() != 4 {
		t.Errorf("Len %d, want 4: three from the file, and all", l.Len())
	}
	bad := filepath.Join(dir, "bad.txt")
	os.WriteFile(bad, []byte("10.0.0.0/8\n10.0.0.0/33\n"), 0o644)
	_, err := Compile("routes[1].access", []config.AccessRule{{Deny: "all"}, {DenyFile: bad}}, os.ReadFile)
	if err == nil || !strings.HasPrefix(err.Error(), "routes[1].access[1].deny_file: "+bad+":2: invalid CIDR") {
		t.Errorf("error %v", err)
	}
	_, err = Compile("routes[1].access", []config.AccessRule{{AllowFile: filepath.Join(dir, "missing")}}, os.ReadFile)
	if err == nil || !strings.Contains(err.Error(), "routes[1].access[0].allow_file: cannot read the address list") {
		t.Errorf("error %v", err)
	}
}

// The flattened ranges agree with trying the rules one by one, on random
// nested and overlapping rule lists, at random addresses and at every
// range boundary.
func TestRangesAgreeWithFirstMatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range 300 {
		var rules []config.AccessRule
		var prefixes []netip.Prefix
		for range 1 + rng.IntN(12) {
			var p netip.Prefix
			if rng.IntN(4) == 0 {
				a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(rng.IntN(4)), 15: byte(rng.IntN(256))})
				p = netip.PrefixFrom(a, 32+rng.IntN(97)).Masked()
			} else {
				a := netip.AddrFrom4([4]byte{10, byte(rng.IntN(3)), byte(rng.IntN(4)), byte(rng.IntN(256))})
				p = netip.PrefixFrom(a, 8+rng.IntN(25)).Masked()
			}
			prefixes = append(prefixes, p)
			if rng.IntN(2) == 0 {
				rules = append(rules, config.AccessRule{Allow: p.String()})
			} else {
				rules = append(rules, config.AccessRule{Deny: p.String()})
			}
		}
		if rng.IntN(3) == 0 {
			rules = append(rules, config.AccessRule{Deny: "all"})
		}
		l := compile(t, rules...)
		probes := []netip.Addr{ip("10.0.0.0"), ip("9.255.255.255"), ip("2001:db8::")}
		for _, p := range prefixes {
			first := p.Addr()
			last := lastAddr(p)
			probes = append(probes, first, first.Prev(), last, last.Next())
		}
		for range 50 {
			probes = append(probes, netip.AddrFrom4([4]byte{10, byte(rng.IntN(3)), byte(rng.IntN(4)), byte(rng.IntN(256))}))
		}
		for _, a := range probes {
			if !a.IsValid() {
				continue
			}
			if got, want := l.Lookup(a), firstMatch(rules, a); got != want {
				t.Fatalf("round %d: %s: ranges say %v, rules say %v\nrules: %+v", round, a, got, want, rules)
			}
		}
	}
}

func firstMatch(rules []config.AccessRule, a netip.Addr) Action {
	for _, r := range rules {
		act, s := Allow, r.Allow
		if r.Deny != "" {
			act, s = Deny, r.Deny
		}
		if s == "all" {
			return act
		}
		p, _ := config.ParsePrefix(s)
		if p.Contains(a.Unmap()) {
			return act
		}
	}
	return NoMatch
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func BenchmarkLookup10kPrefixes(b *testing.B) {
	var rules []config.AccessRule
	for i := range 10000 {
		a := netip.AddrFrom4([4]byte{byte(1 + i%200), byte(i / 200), 0, 0})
		rules = append(rules, config.AccessRule{Deny: netip.PrefixFrom(a, 16+i%9).Masked().String()})
	}
	l, _ := Compile("bench", rules, os.ReadFile)
	probe := ip("100.20.3.4")
	b.ReportAllocs()
	for b.Loop() {
		l.Lookup(probe)
	}
}
