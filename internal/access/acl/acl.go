// Package acl decides whether a client address may use a route, with
// nginx's allow and deny semantics: rules are tried in order, the first
// whose address, CIDR or "all" matches decides, and an address no rule
// matches is allowed. Rules may name files of addresses, read by Compile
// (so on every reload).
//
// Compile flattens the rules, however many, into sorted disjoint address
// ranges with the verdict of the first matching rule, so a lookup is one
// binary search for IPv4 and IPv6 alike.
package acl

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// Action is what the rules say about an address.
type Action uint8

const (
	// NoMatch: no rule matched; the request is allowed, as in nginx.
	NoMatch Action = iota
	Allow
	Deny
)

func (a Action) String() string {
	return [...]string{"no match", "allow", "deny"}[a]
}

// List is a compiled rule list. It is immutable.
type List struct {
	// IPv4 and IPv6 have their own ranges, as in nginx: ::/0 does not
	// match an IPv4 client, nor 0.0.0.0/0 an IPv6 one; "all" matches both.
	v4, v6 ranges
	// invalid is the verdict for a request without an IP address (a unix
	// socket): the first "all" rule's, as nginx's "all" matches those too.
	invalid Action
	rules   int // prefixes after expanding files, for Len
}

// Compile reads rules (reading every file they name through read:
// os.ReadFile, or the compile's own reads) into a List. path names the
// rules in errors, like "routes[2].access". It returns nil for no rules,
// so that a route without a list costs one nil check.
func Compile(path string, rules []config.AccessRule, read func(string) ([]byte, error)) (*List, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	var v4, v6 []item
	n := 0
	add := func(p netip.Prefix, order int, act Action) {
		n++
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		if p.Addr().Is4() {
			v4 = append(v4, newItem(p, order, act))
		} else {
			v6 = append(v6, newItem(p, order, act))
		}
	}
	invalid := NoMatch
	for i, r := range rules {
		rp := fmt.Sprintf("%s[%d]", path, i)
		act, value, file, key := Allow, r.Allow, r.AllowFile, "allow"
		switch {
		case r.Deny != "":
			act, value, key = Deny, r.Deny, "deny"
		case r.DenyFile != "":
			act, file, key = Deny, r.DenyFile, "deny_file"
		case r.AllowFile != "":
			key = "allow_file"
		}
		if file != "" {
			ps, err := readList(read, file)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %v", rp, key, err)
			}
			for _, p := range ps {
				add(p, i, act)
			}
			continue
		}
		if value == "all" {
			if invalid == NoMatch {
				invalid = act
			}
			all := item{start: u128{}, end: u128{^uint64(0), ^uint64(0)}, order: i, act: act}
			v4, v6 = append(v4, all), append(v6, all)
			n++
			continue
		}
		p, err := config.ParsePrefix(value)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %v", rp, key, err)
		}
		add(p, i, act)
	}
	return &List{v4: build(v4), v6: build(v6), invalid: invalid, rules: n}, nil
}

// readList reads one address or CIDR per line; blank lines and text after
// # are ignored. Errors name the file and line.
func readList(read func(string) ([]byte, error), name string) ([]netip.Prefix, error) {
	b, err := read(name)
	if err != nil {
		return nil, fmt.Errorf("cannot read the address list: %v", err)
	}
	var out []netip.Prefix
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		p, err := config.ParsePrefix(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, n, err)
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return out, nil
}

// Lookup returns the verdict of the first rule matching ip.
func (l *List) Lookup(ip netip.Addr) Action {
	if !ip.IsValid() {
		return l.invalid
	}
	ip = ip.Unmap()
	if ip.Is4() {
		return l.v4.lookup(fromAddr(ip))
	}
	return l.v6.lookup(fromAddr(ip))
}

// Allowed reports whether ip may pass: allowed, or matched by no rule.
func (l *List) Allowed(ip netip.Addr) bool { return l.Lookup(ip) != Deny }

// Len is how many prefixes the rules hold, files expanded.
func (l *List) Len() int { return l.rules }

// Ranges is how many disjoint ranges the lookups search.
func (l *List) Ranges() int { return len(l.v4.starts) + len(l.v6.starts) }
