package lint

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/ops/exhaust"
)

// env is what the linter reads from the machine it runs on; tests replace
// it.
type env struct {
	// fileLimit returns the soft and hard file-descriptor limits.
	fileLimit func() (soft, hard uint64, err error)
	// localAddrs are the machine's own addresses.
	localAddrs func() []netip.Addr
}

func machine() env {
	return env{fileLimit: exhaust.FileLimit, localAddrs: interfaceAddrs}
}

func interfaceAddrs() []netip.Addr {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range as {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out
}

// selfLoops warns about pool hosts that are sturdy itself: one of its
// listeners, or the admin listener. A request sent there comes back in
// and goes out again (sturdy answers 508 after a few passes; before that,
// each pass holds two connections).
func (l *linter) selfLoops() {
	type own struct{ what, addr string }
	var owns []own
	for _, ln := range l.c.Listeners {
		owns = append(owns, own{"listener " + ln.Name, ln.Listen})
	}
	if a := l.c.Admin.Listen; a != "off" {
		owns = append(owns, own{"the admin listener", a})
	}
	var local []netip.Addr
	for i, p := range l.c.Pools {
		for j, h := range p.Hosts {
			for _, o := range owns {
				if !l.sameSocket(h.Addr, o.addr, &local) {
					continue
				}
				l.warn(fmt.Sprintf("pools[%d].hosts[%d].addr", i, j), "%s is sturdy's own %s (%s): requests sent there come back into sturdy, a loop", h.Addr, o.what, o.addr)
			}
		}
	}
}

// sameSocket reports whether connecting to host reaches the listening
// address listen on this machine.
func (l *linter) sameSocket(host, listen string, local *[]netip.Addr) bool {
	hh, hp, err1 := net.SplitHostPort(host)
	lh, lp, err2 := net.SplitHostPort(listen)
	if err1 != nil || err2 != nil || hp != lp || lp == "0" {
		return false
	}
	if strings.EqualFold(hh, lh) {
		return true
	}
	hip, herr := netip.ParseAddr(hh)
	if strings.EqualFold(hh, "localhost") {
		hip, herr = netip.AddrFrom4([4]byte{127, 0, 0, 1}), nil
	}
	if herr != nil {
		return false // a name: cannot tell without resolving it
	}
	hip = hip.Unmap()
	lip, lerr := netip.ParseAddr(lh)
	if lh != "" && lerr != nil {
		return strings.EqualFold(lh, "localhost") && hip.IsLoopback()
	}
	if lh == "" || lip.IsUnspecified() {
		// Listening on every address: the host is sturdy when it is one of
		// the machine's own.
		if hip.IsLoopback() || hip.IsUnspecified() {
			return true
		}
		if *local == nil {
			*local = l.env.localAddrs()
		}
		for _, a := range *local {
			if a == hip {
				return true
			}
		}
		return false
	}
	return lip.Unmap() == hip
}

// minFiles is the least file-descriptor limit that is not a warning:
// every client connection and every backend connection takes one.
const minFiles = 4096

// fileLimit warns when the file-descriptor limit sturdy will run with
// (the hard one: it raises the soft one at start) is low for the config.
func (l *linter) fileLimit() {
	soft, hard, err := l.env.fileLimit()
	if err != nil || hard == 0 {
		return
	}
	limit := max(soft, hard)
	need := uint64(minFiles)
	capped := uint64(0)
	for _, p := range l.c.Pools {
		if p.MaxConnsPerHost > 0 {
			capped += uint64(p.MaxConnsPerHost * len(p.Hosts))
		}
	}
	// Each capped backend connection is matched by a client one, plus
	// sturdy's own files (logs, listeners, the admin, DNS, webhooks).
	need = max(need, 2*capped+256)
	if limit >= need {
		return
	}
	l.warn("listeners", "the file descriptor limit is %d (soft %d, hard %d); each client and each backend connection takes one, and this config wants at least %d: when they run out, sturdy answers 503 and counts local_error (never against a backend). Raise LimitNOFILE in the systemd unit or ulimit -n", limit, soft, hard, need)
}
