package doctor

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
)

// usage indexes which locations proxy to which upstream.
type usage struct {
	site *nginx.Site
	locs map[*nginx.Upstream][]*nginx.Location
}

func newUsage(site *nginx.Site) *usage {
	u := &usage{site: site, locs: map[*nginx.Upstream][]*nginx.Location{}}
	for _, srv := range site.Servers {
		for _, l := range srv.Proxied() {
			if up := l.Target.Upstream; up != nil {
				u.locs[up] = append(u.locs[up], l)
			}
		}
	}
	return u
}

// ev renders a directive as an evidence line.
func ev(d *nginx.Directive) string { return d.Pos() + ": " + d.String() }

// nextUpstream returns the proxy_next_upstream conditions in effect at l
// and the directive that set them (nil for nginx's default "error timeout").
func nextUpstream(l *nginx.Location) ([]string, *nginx.Directive) {
	if d := l.Get1("proxy_next_upstream"); d != nil {
		return d.Args, d
	}
	return []string{"error", "timeout"}, nil
}

// readTimeout returns proxy_read_timeout in effect at l (default 60s) and
// the directive that set it.
func readTimeout(l *nginx.Location) (time.Duration, *nginx.Directive) {
	if d := l.Get1("proxy_read_timeout"); d != nil {
		if t, err := nginx.ParseTime(d.Arg(0)); err == nil {
			return t, d
		}
	}
	return 60 * time.Second, nil
}

// primaries returns the servers that take traffic normally: not backup,
// not down.
func primaries(u *nginx.Upstream) []*nginx.UpstreamServer {
	var out []*nginx.UpstreamServer
	for _, s := range u.Servers {
		if !s.Backup && !s.Down {
			out = append(out, s)
		}
	}
	return out
}

func hasBackup(u *nginx.Upstream) bool {
	return slices.ContainsFunc(u.Servers, func(s *nginx.UpstreamServer) bool { return s.Backup })
}

// passive reports whether nginx's passive checks can eject u's servers
// (nginx ignores max_fails when a group has a single server) and describes
// the settings, e.g. "max_fails=1 fail_timeout=10s (nginx's defaults)".
func passive(u *nginx.Upstream) (bool, string) {
	ps := primaries(u)
	if len(ps) < 2 && !hasBackup(u) {
		return false, ""
	}
	on := false
	for _, s := range ps {
		if s.MaxFails > 0 {
			on = true
		}
	}
	if !on {
		return false, ""
	}
	s := ps[0]
	desc := fmt.Sprintf("max_fails=%d fail_timeout=%s", s.MaxFails, fmtDur(s.FailTimeout))
	if !s.MaxFailsSet && !s.FailTimeoutSet {
		desc += ", nginx's defaults"
	}
	return true, desc
}

// minMaxFails is the smallest max_fails among u's primary servers that
// have passive checks on.
func minMaxFails(u *nginx.Upstream) int {
	m := 0
	for _, s := range primaries(u) {
		if s.MaxFails > 0 && (m == 0 || s.MaxFails < m) {
			m = s.MaxFails
		}
	}
	return m
}

// serverEvidence lists an upstream's block line and its first servers.
func serverEvidence(u *nginx.Upstream) []string {
	out := []string{ev(u.Dir)}
	for i, s := range u.Servers {
		if i == 3 {
			out = append(out, fmt.Sprintf("(and %d more servers)", len(u.Servers)-3))
			break
		}
		out = append(out, ev(s.Dir))
	}
	return out
}

// fmtDur prints durations the way nginx configs write them.
func fmtDur(d time.Duration) string { return nginx.FormatTime(d) }

// fmtSpan prints an elapsed time for people: "6h38m", "19m10s", "45s".
func fmtSpan(d time.Duration) string {
	d = d.Round(time.Second)
	h, m, s := d/time.Hour, (d%time.Hour)/time.Minute, (d%time.Minute)/time.Second
	switch {
	case h > 0 && m > 0:
		return fmt.Sprintf("%dh%dm", h, m)
	case h > 0:
		return fmt.Sprintf("%dh", h)
	case m > 0 && s > 0:
		return fmt.Sprintf("%dm%ds", m, s)
	case m > 0:
		return fmt.Sprintf("%dm", m)
	}
	return fmt.Sprintf("%ds", s)
}

// fmtBytes prints a byte count with a binary unit.
func fmtBytes(n float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for n >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}

// list joins up to n items, "a, b and c", adding "and N more".
func list(items []string, n int) string {
	if len(items) > n {
		more := len(items) - n
		items = append(slices.Clone(items[:n]), fmt.Sprintf("%d more", more))
	}
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

func pct(n, of int) int {
	if of == 0 {
		return 0
	}
	return (n*100 + of/2) / of
}
