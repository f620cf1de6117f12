// Command report turns the benchmark's raw measurements into a markdown table.
//
//	report wrk FILE       parse one `wrk --latency` output and print
//	                      "requests rps p50_us p99_us errors"
//	report h2load FILE    the same from an h2load output (which has no
//	                      percentiles: its mean time per request is given as
//	                      p50, p99 as "-")
//	report line FILE      check and print the last line of a `bench/load` output
//	report table FILE     read result lines (see below) and print the table of
//	                      medians and the issue-7 targets
//
// A result line, one per measured cell, written by bench/run.sh:
//
//	round proxy body conns requests rps p50_us p99_us cpu_us rss_kib hwm_kib errors other_pct
//
// cpu_us is the proxy's utime+stime over the run in µs, rss_kib its VmRSS
// sampled in the middle of the run and hwm_kib its VmHWM at the end (both
// summed over the proxy's processes); "-" where there is no proxy (direct).
// other_pct is the share of the proxy core that other processes used during
// the run (a shared machine's noise).
// Ratios are computed within a round, then the median over rounds is taken.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: report wrk FILE | report table FILE")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "wrk":
		err = cmdWrk(os.Args[2])
	case "h2load":
		err = cmdH2load(os.Args[2])
	case "line":
		err = cmdLine(os.Args[2])
	case "table":
		err = cmdTable(os.Args[2])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

// ---- wrk output ----

var (
	reRequests = regexp.MustCompile(`(?m)^\s*(\d+) requests in `)
	reRPS      = regexp.MustCompile(`(?m)^Requests/sec:\s*([\d.]+)`)
	reP50      = regexp.MustCompile(`(?m)^\s*50%\s+([\d.]+)(us|ms|s|m|h)\s*$`)
	reP99      = regexp.MustCompile(`(?m)^\s*99%\s+([\d.]+)(us|ms|s|m|h)\s*$`)
	reSocket   = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
	reNon2xx   = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
)

func cmdWrk(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	req, rps := reRequests.FindStringSubmatch(s), reRPS.FindStringSubmatch(s)
	p50, p99 := reP50.FindStringSubmatch(s), reP99.FindStringSubmatch(s)
	if req == nil || rps == nil || p50 == nil || p99 == nil {
		return fmt.Errorf("%s: not a complete `wrk --latency` output", path)
	}
	errs := 0
	if m := reSocket.FindStringSubmatch(s); m != nil {
		for _, v := range m[1:] {
			n, _ := strconv.Atoi(v)
			errs += n
		}
	}
	if m := reNon2xx.FindStringSubmatch(s); m != nil {
		n, _ := strconv.Atoi(m[1])
		errs += n
	}
	fmt.Printf("%s %s %.1f %.1f %d\n", req[1], rps[1], micros(p50[1], p50[2]), micros(p99[1], p99[2]), errs)
	return nil
}

var (
	reH2Finished = regexp.MustCompile(`(?m)^finished in [\d.]+s, ([\d.]+) req/s`)
	reH2Requests = regexp.MustCompile(`(?m)^requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout`)
	reH2Status   = regexp.MustCompile(`(?m)^status codes: \d+ 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx`)
	reH2Time     = regexp.MustCompile(`(?m)^time for request:\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)\s`)
)

func cmdH2load(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	line, err := parseH2load(string(b))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	fmt.Println(line)
	return nil
}

// parseH2load turns an h2load output into "requests rps mean_us - errors":
// failed, errored and timed-out requests and non-2xx answers are errors.
func parseH2load(s string) (string, error) {
	fin, req, st, tm := reH2Finished.FindStringSubmatch(s), reH2Requests.FindStringSubmatch(s), reH2Status.FindStringSubmatch(s), reH2Time.FindStringSubmatch(s)
	if fin == nil || req == nil || st == nil || tm == nil {
		return "", errors.New("not a complete h2load output")
	}
	errs := 0
	for _, v := range append(req[2:], st[1:]...) {
		n, _ := strconv.Atoi(v)
		errs += n
	}
	return fmt.Sprintf("%s %s %.1f - %d", req[1], fin[1], micros(tm[1], tm[2]), errs), nil
}

func cmdLine(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	fs := strings.Fields(last)
	if len(fs) != 5 {
		return fmt.Errorf("%s: last line %q is not \"requests rps p50_us p99_us errors\"", path, last)
	}
	for _, f := range fs {
		if _, err := strconv.ParseFloat(f, 64); err != nil {
			return fmt.Errorf("%s: last line %q: %v", path, last, err)
		}
	}
	fmt.Println(last)
	return nil
}

func micros(v, unit string) float64 {
	f, _ := strconv.ParseFloat(v, 64)
	switch unit {
	case "ms":
		f *= 1e3
	case "s":
		f *= 1e6
	case "m":
		f *= 60e6
	case "h":
		f *= 3600e6
	}
	return f
}

// ---- table ----

type result struct {
	round          int
	proxy, body    string
	conns          int
	requests       float64
	rps, p50, p99  float64
	cpuUs          float64 // NaN when not measured
	rssKiB, hwmKiB float64 // NaN when not measured
	errors         int
	other          float64
}

func (r result) cpuPerReq() float64 {
	if math.IsNaN(r.cpuUs) || r.requests == 0 {
		return math.NaN()
	}
	return r.cpuUs / r.requests
}

type cellKey struct {
	body  string
	conns int
}

type roundKey struct {
	cell  cellKey
	round int
	proxy string
}

var proxyOrder = []string{"direct", "sturdy", "sturdy-health", "sturdy-nethttp", "nginx", "haproxy", "caddy"}

func order(p string) int {
	for i, q := range proxyOrder {
		if q == p {
			return i
		}
	}
	return len(proxyOrder)
}

func parseNum(s string) float64 {
	if s == "-" {
		return math.NaN()
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.NaN()
	}
	return f
}

func readResults(path string) ([]result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []result
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		fs := strings.Fields(t)
		if len(fs) != 13 {
			return nil, fmt.Errorf("%s:%d: want 13 fields, got %d", path, line, len(fs))
		}
		round, _ := strconv.Atoi(fs[0])
		conns, _ := strconv.Atoi(fs[3])
		errs, _ := strconv.Atoi(fs[11])
		out = append(out, result{
			round: round, proxy: fs[1], body: fs[2], conns: conns,
			requests: parseNum(fs[4]), rps: parseNum(fs[5]), p50: parseNum(fs[6]), p99: parseNum(fs[7]),
			cpuUs: parseNum(fs[8]), rssKiB: parseNum(fs[9]), hwmKiB: parseNum(fs[10]), errors: errs, other: parseNum(fs[12]),
		})
	}
	return out, sc.Err()
}

// median of the non-NaN values; NaN if there are none.
func median(xs []float64) float64 {
	var v []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// summary is the medians over rounds of one proxy in one cell.
type summary struct {
	n                        int
	rps, p50, p99, addedP50  float64
	cpu, rssMiB, hwmMiB      float64
	xDirect, xNginx, cpuXNgx float64 // ratios from the same round
	p99XNginx, p50MinusNginx float64
	xSturdy, cpuXSturdy      float64 // sturdy-health: rps and CPU ÷ sturdy's
	xCaddy, cpuXCaddy        float64
	errors                   int
	other                    float64 // max over rounds
	// per holds the per-round values the targets are judged on.
	per map[string][]float64
}

// verdict judges a target round by round: met when every round meets it,
// not met when none does, inconclusive when the rounds disagree (noise).
func verdict(vals []float64, pass func(float64) bool) string {
	n, ok := 0, 0
	for _, v := range vals {
		if math.IsNaN(v) {
			continue
		}
		n++
		if pass(v) {
			ok++
		}
	}
	switch {
	case n == 0:
		return "n/a"
	case ok == n:
		return "met"
	case ok == 0:
		return "not met"
	}
	return fmt.Sprintf("inconclusive (%d of %d rounds met it)", ok, n)
}

func inv(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = 1 / x
	}
	return out
}

func cmdTable(path string) error {
	rs, err := readResults(path)
	if err != nil {
		return err
	}
	if len(rs) == 0 {
		return fmt.Errorf("%s: no results", path)
	}
	byRound := map[roundKey]result{}
	cells := map[cellKey]bool{}
	proxies := map[cellKey]map[string]bool{}
	rounds := map[int]bool{}
	for _, r := range rs {
		c := cellKey{r.body, r.conns}
		byRound[roundKey{c, r.round, r.proxy}] = r
		cells[c] = true
		rounds[r.round] = true
		if proxies[c] == nil {
			proxies[c] = map[string]bool{}
		}
		proxies[c][r.proxy] = true
	}
	var cellList []cellKey
	for c := range cells {
		cellList = append(cellList, c)
	}
	sort.Slice(cellList, func(i, j int) bool {
		a, b := cellList[i], cellList[j]
		if a.body != b.body {
			return bodyBytes(a.body) < bodyBytes(b.body)
		}
		return a.conns > b.conns
	})
	var roundList []int
	for r := range rounds {
		roundList = append(roundList, r)
	}
	sort.Ints(roundList)

	ratio := func(a, b float64) float64 {
		if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
			return math.NaN()
		}
		return a / b
	}
	sums := map[cellKey]map[string]summary{}
	for _, c := range cellList {
		sums[c] = map[string]summary{}
		for p := range proxies[c] {
			var rps, p50, p99, added, cpu, rss, hwm, xd, xn, cxn, p99xn, p50mn, xs, cxs, xc, cxc []float64
			s := summary{}
			for _, rd := range roundList {
				r, ok := byRound[roundKey{c, rd, p}]
				if !ok {
					continue
				}
				s.n++
				s.errors += r.errors
				if !(s.other >= r.other) {
					s.other = r.other
				}
				rps, p50, p99 = append(rps, r.rps), append(p50, r.p50), append(p99, r.p99)
				cpu = append(cpu, r.cpuPerReq())
				rss, hwm = append(rss, r.rssKiB/1024), append(hwm, r.hwmKiB/1024)
				get := func(q string) (result, bool) { x, ok := byRound[roundKey{c, rd, q}]; return x, ok }
				if d, ok := get("direct"); ok {
					xd = append(xd, ratio(r.rps, d.rps))
					added = append(added, r.p50-d.p50)
				}
				if n, ok := get("nginx"); ok {
					xn = append(xn, ratio(r.rps, n.rps))
					cxn = append(cxn, ratio(r.cpuPerReq(), n.cpuPerReq()))
					p99xn = append(p99xn, ratio(r.p99, n.p99))
					p50mn = append(p50mn, r.p50-n.p50)
				}
				if st, ok := get("sturdy"); ok {
					xs = append(xs, ratio(r.rps, st.rps))
					cxs = append(cxs, ratio(r.cpuPerReq(), st.cpuPerReq()))
				}
				if cd, ok := get("caddy"); ok {
					xc = append(xc, ratio(r.rps, cd.rps))
					cxc = append(cxc, ratio(r.cpuPerReq(), cd.cpuPerReq()))
				}
			}
			s.rps, s.p50, s.p99, s.addedP50 = median(rps), median(p50), median(p99), median(added)
			s.cpu, s.rssMiB, s.hwmMiB = median(cpu), median(rss), median(hwm)
			s.xDirect, s.xNginx, s.cpuXNgx = median(xd), median(xn), median(cxn)
			s.p99XNginx, s.p50MinusNginx = median(p99xn), median(p50mn)
			s.per = map[string][]float64{"cpu": cpu, "cpuXNgx": cxn, "cpuXCaddy": cxc, "p99XNginx": p99xn,
				"p50MinusNginx": p50mn, "hwm": hwm, "cpuXSturdy": cxs, "xDirect": xd}
			s.xSturdy, s.cpuXSturdy = median(xs), median(cxs)
			s.xCaddy, s.cpuXCaddy = median(xc), median(cxc)
			sums[c][p] = s
		}
	}

	fmt.Printf("Medians over %d round(s); ratios are taken within each round, then the median. "+
		"CPU = proxy utime+stime ÷ requests served. RSS = VmRSS mid-run (VmHWM = peak during the run), summed over the proxy's processes. "+
		"Other load = highest share of the proxy core used by unrelated processes in any round (noise; above ~10 %% the row is suspect).\n\n",
		len(roundList))
	fmt.Println("| body | conns | proxy | req/s | p50 | p99 | +p50 vs direct | CPU µs/req | RSS MiB (peak) | × direct | × nginx req/s | × nginx CPU | errors | other load % |")
	fmt.Println("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, c := range cellList {
		var ps []string
		for p := range proxies[c] {
			ps = append(ps, p)
		}
		sort.Slice(ps, func(i, j int) bool {
			return order(ps[i]) < order(ps[j]) || order(ps[i]) == order(ps[j]) && ps[i] < ps[j]
		})
		for _, p := range ps {
			s := sums[c][p]
			rss := "–"
			if !math.IsNaN(s.rssMiB) {
				rss = fmt.Sprintf("%.1f (%.1f)", s.rssMiB, s.hwmMiB)
			}
			added, other := "–", "–" // direct does not use the proxy core
			if p != "direct" {
				added, other = fmtUs(s.addedP50), fmtF(s.other, 0)
			}
			fmt.Printf("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s |\n",
				c.body, c.conns, p, fmtInt(s.rps), fmtUs(s.p50), fmtUs(s.p99), added,
				fmtF(s.cpu, 1), rss, fmtF(s.xDirect, 2), fmtF(s.xNginx, 2), fmtF(s.cpuXNgx, 2), s.errors, other)
		}
	}

	printTargets(sums)
	printTLSTargets(sums)
	return nil
}

// printTLSTargets judges issue 33's item 4 on the TLS, HTTP/2 and gRPC
// cells. Capacity per core is 1 ÷ CPU per request (or handshake), as for
// the plain cells: the load core caps the rates measured.
func printTLSTargets(sums map[cellKey]map[string]summary) {
	type tgt struct {
		cell     cellKey
		target   string
		measured func(st, ng, d summary) string
		per      func(st summary) []float64
		pass     func(float64) bool
	}
	atMost := func(max float64) func(float64) bool { return func(v float64) bool { return v <= max } }
	atLeast := func(min float64) func(float64) bool { return func(v float64) bool { return v >= min } }
	cpuX := func(st, ng, _ summary) string {
		return fmt.Sprintf("%.2f × nginx CPU (%s vs %s µs); req/s %.2f ×", st.cpuXNgx, fmtF(st.cpu, 1), fmtF(ng.cpu, 1), st.xNginx)
	}
	perCore := func(st, ng, _ summary) string {
		return fmt.Sprintf("%.2f × nginx per core (CPU %s vs %s µs per connection); measured rate %.2f ×", 1/st.cpuXNgx, fmtF(st.cpu, 1), fmtF(ng.cpu, 1), st.xNginx)
	}
	ts := []tgt{
		{cellKey{"tls1k", 64}, "tls1k/64c: CPU per request ≤ 1.2 × nginx", cpuX, func(st summary) []float64 { return st.per["cpuXNgx"] }, atMost(1.2)},
		{cellKey{"hsfull", 16}, "hsfull/16c: full handshakes per core ≥ 0.8 × nginx", perCore, func(st summary) []float64 { return inv(st.per["cpuXNgx"]) }, atLeast(0.8)},
		{cellKey{"hsresume", 16}, "hsresume/16c: resumed handshakes per core ≥ 1.0 × nginx", perCore, func(st summary) []float64 { return inv(st.per["cpuXNgx"]) }, atLeast(1.0)},
		{cellKey{"h2tls1k", 16}, "h2tls1k/16c×32: CPU per request ≤ 1.2 × nginx", cpuX, func(st summary) []float64 { return st.per["cpuXNgx"] }, atMost(1.2)},
		{cellKey{"grpcunary", 1}, "grpcunary/1c: added p50 ≤ nginx grpc_pass's", func(st, ng, _ summary) string {
			return fmt.Sprintf("+%s vs direct, nginx +%s; difference %s", fmtUs(st.addedP50), fmtUs(ng.addedP50), fmtUs(st.p50MinusNginx))
		}, func(st summary) []float64 { return st.per["p50MinusNginx"] }, atMost(0)},
		{cellKey{"grpcunary", 1}, "grpcunary/1c: CPU per call ≤ nginx grpc_pass's", cpuX, func(st summary) []float64 { return st.per["cpuXNgx"] }, atMost(1.0)},
		{cellKey{"grpcstream", 4}, "grpcstream/4c: throughput ≥ 0.8 × direct", func(st, ng, d summary) string {
			return fmt.Sprintf("%.2f × direct (%.0f vs %.0f MiB/s; nginx %.2f ×); CPU %.2f × nginx", st.xDirect, st.rps, d.rps, ng.xDirect, st.cpuXNgx)
		}, func(st summary) []float64 { return st.per["xDirect"] }, atLeast(0.8)},
	}
	header := false
	for _, t := range ts {
		cs, ok := sums[t.cell]
		if !ok {
			continue
		}
		if !header {
			fmt.Println()
			fmt.Println("Targets of issue 33, item 4 (sturdy against nginx; TLS 1.3, ECDSA P-256; same-round ratios, medians):")
			fmt.Println()
			fmt.Println("| target | measured | status |")
			fmt.Println("|---|---|---|")
			header = true
		}
		st, okS := cs["sturdy"]
		ng, okN := cs["nginx"]
		if !okS || !okN {
			fmt.Printf("| %s | sturdy or nginx not measured | n/a |\n", t.target)
			continue
		}
		fmt.Printf("| %s | %s | %s |\n", t.target, t.measured(st, ng, cs["direct"]), verdict(t.per(st), t.pass))
	}
}

func printTargets(sums map[cellKey]map[string]summary) {
	if _, ok := sums[cellKey{"1k", 64}]; !ok {
		if _, ok := sums[cellKey{"1k", 1}]; !ok {
			return // only other cells (BODIES=tls): issue 7's targets do not apply
		}
	}
	fmt.Println()
	fmt.Println("Targets of issue 7 (sturdy; medians of same-round ratios; a target is met or not met only when every round agrees):")
	fmt.Println()
	fmt.Println("| target | measured | status |")
	fmt.Println("|---|---|---|")
	k64 := sums[cellKey{"1k", 64}]
	k1 := sums[cellKey{"1k", 1}]
	st, haveSt := k64["sturdy"]
	row := func(target, measured, status string) {
		fmt.Printf("| %s | %s | %s |\n", target, measured, status)
	}
	atLeast := func(min float64) func(float64) bool { return func(v float64) bool { return v >= min } }
	atMost := func(max float64) func(float64) bool { return func(v float64) bool { return v <= max } }
	na := func(target, why string) { fmt.Printf("| %s | %s | n/a |\n", target, why) }
	if !haveSt {
		na("all sturdy targets", "sturdy was not measured")
	} else {
		// "One core each": a proxy's capacity per core is 1 ÷ its CPU time per
		// request. Measured req/s is capped by the shared load core (wrk +
		// origin), so it is shown but does not decide.
		if !math.IsNaN(st.cpuXCaddy) {
			c := 1 / st.cpuXCaddy
			row("1k/64c: per core ≥ 2 × Caddy", fmt.Sprintf("%.2f × Caddy per core (req/s %.2f ×)", c, st.xCaddy), verdict(inv(st.per["cpuXCaddy"]), atLeast(2)))
		} else {
			na("1k/64c: per core ≥ 2 × Caddy", "Caddy not measured")
		}
		if !math.IsNaN(st.cpuXNgx) {
			c := 1 / st.cpuXNgx
			row("1k/64c: per core ≥ 0.5 × nginx", fmt.Sprintf("%.2f × nginx per core (req/s %.2f ×)", c, st.xNginx), verdict(inv(st.per["cpuXNgx"]), atLeast(0.5)))
			row("1k/64c: stretch, per core ≥ 0.8 × nginx", fmt.Sprintf("%.2f × nginx per core", c), verdict(inv(st.per["cpuXNgx"]), atLeast(0.8)))
		} else {
			na("1k/64c: per core ≥ 0.5 × nginx", "nginx not measured")
		}
		row("1k/64c: proxy CPU ≤ 50 µs/request", fmt.Sprintf("%s µs (nginx %s µs)", fmtF(st.cpu, 1), fmtF(k64["nginx"].cpu, 1)), verdict(st.per["cpu"], atMost(50)))
		if !math.IsNaN(st.p99XNginx) {
			row("1k/64c: p99 ≤ 1.5 × nginx's", fmt.Sprintf("%.2f × nginx (%s vs %s)", st.p99XNginx, fmtUs(st.p99), fmtUs(k64["nginx"].p99)), verdict(st.per["p99XNginx"], atMost(1.5)))
		} else {
			na("1k/64c: p99 ≤ 1.5 × nginx's", "nginx not measured")
		}
		if s1, ok := k1["sturdy"]; ok && !math.IsNaN(s1.p50MinusNginx) {
			row("1k/1c: added p50 within 40 µs of nginx's", fmt.Sprintf("+%s vs direct, nginx +%s; difference %s",
				fmtUs(s1.addedP50), fmtUs(k1["nginx"].addedP50), fmtUs(s1.p50MinusNginx)), verdict(s1.per["p50MinusNginx"], atMost(40)))
		} else {
			na("1k/1c: added p50 within 40 µs of nginx's", "sturdy or nginx not measured at 1 connection")
		}
		row("1k/64c: RSS under load ≤ 40 MiB", fmt.Sprintf("%s MiB (peak %s)", fmtF(st.rssMiB, 1), fmtF(st.hwmMiB, 1)), verdict(st.per["hwm"], atMost(40)))
	}
	if h, ok := k64["sturdy-health"]; ok && !math.IsNaN(h.cpuXSturdy) {
		// Per-core throughput on ÷ off = CPU per request off ÷ on.
		c := 1 / h.cpuXSturdy
		row("1k/64c: health model on vs off ≤ 5 % throughput (per core)", fmt.Sprintf("on = %.3f × off per core (CPU %s vs %s µs; req/s %.2f ×)",
			c, fmtF(h.cpu, 1), fmtF(st.cpu, 1), h.xSturdy), verdict(inv(h.per["cpuXSturdy"]), atLeast(0.95)))
	} else {
		na("health model on vs off ≤ 5 % throughput", "pending: sturdy-health not measured")
	}
	// net/http's front end against the native one, the default (no
	// target of its own: what the default buys).
	for _, c := range []cellKey{{"1k", 64}, {"64k", 64}, {"1k", 1}} {
		n, ok := sums[c]["sturdy-nethttp"]
		if !ok || math.IsNaN(n.cpuXSturdy) {
			continue
		}
		row(fmt.Sprintf("%s/%dc: net/http's front end vs the native one", c.body, c.conns),
			fmt.Sprintf("CPU %.3f × (%s vs %s µs; %.2f × nginx), +p50 %s vs %s", n.cpuXSturdy, fmtF(n.cpu, 1),
				fmtF(sums[c]["sturdy"].cpu, 1), n.cpuXNgx, fmtUs(n.addedP50), fmtUs(sums[c]["sturdy"].addedP50)), "measured")
	}
}

// bodyBytes orders the cells: proxied bodies (1k, 64k) first, then files
// (static1k, static1m) and compression (gzip64k), each by size in KiB.
func bodyBytes(b string) int {
	kind := strings.TrimRight(b, "0123456789kKmM")
	size := strings.TrimPrefix(b, kind)
	scale := 1
	if strings.HasSuffix(size, "m") || strings.HasSuffix(size, "M") {
		scale = 1024
	}
	n, _ := strconv.Atoi(strings.TrimRight(size, "kKmM"))
	rank := map[string]int{"": 0, "static": 1, "gzip": 2, "tls": 3, "hsfull": 4, "hsresume": 5, "h2tls": 6, "grpcunary": 7, "grpcstream": 8}[kind]
	return rank<<30 + n*scale
}

func fmtF(f float64, prec int) string {
	if math.IsNaN(f) {
		return "–"
	}
	return strconv.FormatFloat(f, 'f', prec, 64)
}

func fmtInt(f float64) string {
	if math.IsNaN(f) {
		return "–"
	}
	return strconv.FormatFloat(math.Round(f), 'f', 0, 64)
}

func fmtUs(us float64) string {
	switch {
	case math.IsNaN(us):
		return "–"
	case math.Abs(us) >= 10000:
		return fmt.Sprintf("%.1f ms", us/1000)
	case math.Abs(us) >= 1000:
		return fmt.Sprintf("%.2f ms", us/1000)
	}
	return fmt.Sprintf("%.0f µs", us)
}
