// Package accesslog reads nginx access logs as a stream and counts what a
// health review needs from them: answers by status per minute, answers
// served stale from the cache, health checks and monitors answered from the
// cache, and which clients and routes got the 5xx. It understands the
// "combined" format with extra fields after it (such as
// $upstream_cache_status) and JSON lines (log_format escape=json).
package accesslog

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Entry is one parsed access-log line.
type Entry struct {
	Time   time.Time
	Client string
	Method string
	Path   string // without the query string
	Status int
	Agent  string
	// Cache is $upstream_cache_status when the line has it (HIT, MISS,
	// STALE, UPDATING, EXPIRED, BYPASS, REVALIDATED), else "".
	Cache    string
	NonASCII bool
}

// The expressions are compiled on first use, not at start: every sturdy
// command links this package, and only doctor reads access logs (compiled
// at start they were half a megabyte of the proxy's heap, and the pages
// of the regexp and Unicode tables their compiling touched stayed
// resident).
var combined = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(\S+) \S+ \S+ \[([^\]]+)\] "((?:[^"\\]|\\.)*)" (\d{3}) \S+(?: "((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)")?(.*)$`)
})

// cacheStatus reports whether s is a value of $upstream_cache_status.
func cacheStatus(s string) bool {
	switch s {
	case "HIT", "MISS", "STALE", "UPDATING", "EXPIRED", "BYPASS", "REVALIDATED":
		return true
	}
	return false
}

// ParseLine parses a combined-format or JSON access-log line.
func ParseLine(line string) (Entry, bool) {
	if strings.HasPrefix(line, "{") {
		return parseJSON(line)
	}
	m := combined().FindStringSubmatch(line)
	if m == nil {
		return Entry{}, false
	}
	t, err := time.Parse("02/Jan/2006:15:04:05 -0700", m[2])
	if err != nil {
		return Entry{}, false
	}
	e := Entry{Client: m[1], Agent: m[6]}
	// wall-clock time, as the error log has no zone
	e.Time = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
	e.Status, _ = strconv.Atoi(m[4])
	e.setRequest(m[3])
	for _, f := range strings.Fields(m[7]) {
		if cacheStatus(f) {
			e.Cache = f
			break
		}
	}
	return e, true
}

func (e *Entry) setRequest(req string) {
	method, rest, _ := strings.Cut(req, " ")
	e.Method = method
	if i := strings.LastIndex(rest, " HTTP/"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest = rest[:i]
	}
	e.Path = rest
	e.NonASCII = strings.Contains(req, `\x`) || strings.IndexFunc(req, func(r rune) bool { return r >= 0x80 || r < 0x20 }) >= 0
}

func parseJSON(line string) (Entry, bool) {
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		return Entry{}, false
	}
	str := func(keys ...string) string {
		for _, k := range keys {
			switch v := m[k].(type) {
			case string:
				return v
			case float64:
				return strconv.FormatFloat(v, 'f', -1, 64)
			}
		}
		return ""
	}
	e := Entry{Client: str("remote_addr", "client"), Agent: str("http_user_agent", "user_agent")}
	e.Status, _ = strconv.Atoi(str("status"))
	if e.Status == 0 {
		return Entry{}, false
	}
	if ts := str("time_iso8601", "time", "timestamp"); ts != "" {
		if t, err := time.Parse(time.RFC3339, ts); err == nil {
			e.Time = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
		}
	}
	e.setRequest(str("request"))
	if c := strings.ToUpper(str("upstream_cache_status", "cache_status")); cacheStatus(c) {
		e.Cache = c
	}
	return e, true
}

// Result is what an access log showed.
type Result struct {
	Files  []string `json:"files"`
	Lines  int64    `json:"lines"`
	Parsed int64    `json:"parsed_lines"`
	// Status5xx counts 5xx answers; ByStatus counts answers per status.
	Status5xx int           `json:"status_5xx"`
	ByStatus  map[int]int64 `json:"by_status"`
	// Stale counts answers served STALE or UPDATING from the cache, with
	// the first and last time and the routes that got most of them.
	Stale       int64     `json:"stale"`
	StaleFirst  time.Time `json:"stale_first"`
	StaleLast   time.Time `json:"stale_last"`
	StaleRoutes []Count   `json:"stale_routes"`
	// MonitorCached counts answers from the cache (HIT, STALE, UPDATING) to
	// uptime monitors and health-check paths: checks that never reached
	// the backend.
	MonitorCached  int64  `json:"monitor_cached"`
	MonitorExample string `json:"monitor_example,omitempty"`
	// Top clients and routes of the 5xx answers.
	Clients5xx  []Count `json:"clients_5xx"`
	Routes5xx   []Count `json:"routes_5xx"`
	NonASCII5xx int     `json:"non_ascii_5xx"`
}

// Count is a key and how often it was seen.
type Count struct {
	Key string `json:"key"`
	N   int64  `json:"n"`
}

// Analyzer aggregates access-log lines. It is not safe for concurrent use.
type Analyzer struct {
	res                            Result
	staleRoutes, clients5, routes5 map[string]int64
	maxKeys                        int
}

// New returns an Analyzer that tracks at most maxKeys distinct clients and
// routes (0 means 10000).
func New(maxKeys int) *Analyzer {
	if maxKeys <= 0 {
		maxKeys = 10000
	}
	return &Analyzer{
		res:         Result{ByStatus: map[int]int64{}},
		staleRoutes: map[string]int64{}, clients5: map[string]int64{}, routes5: map[string]int64{},
		maxKeys: maxKeys,
	}
}

var monitorAgent = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)uptime|monitor|pingdom|statuscake|healthcheck|health-check|blackbox|kube-probe|elb-healthchecker|site24x7|datadog`)
})

var healthPath = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)^/(healthz?|health[-_]?check|status|ping|ready|readyz|live|livez|alive|nginx-health)(/|$)`)
})

// IsHealthPath reports whether path looks like a health or readiness
// endpoint (/health, /healthz, /status, /ping, /ready, ...).
func IsHealthPath(path string) bool { return healthPath().MatchString(path) }

func (a *Analyzer) add(m map[string]int64, k string) {
	if _, ok := m[k]; ok || len(m) < a.maxKeys {
		m[k]++
	}
}

// Line feeds one line.
func (a *Analyzer) Line(line string) {
	r := &a.res
	r.Lines++
	e, ok := ParseLine(line)
	if !ok {
		return
	}
	r.Parsed++
	r.ByStatus[e.Status]++
	route := e.Method + " " + e.Path
	if e.Status >= 500 {
		r.Status5xx++
		a.add(a.clients5, e.Client)
		a.add(a.routes5, route)
		if e.NonASCII {
			r.NonASCII5xx++
		}
	}
	if e.Cache == "STALE" || e.Cache == "UPDATING" {
		r.Stale++
		if r.StaleFirst.IsZero() || e.Time.Before(r.StaleFirst) {
			r.StaleFirst = e.Time
		}
		if e.Time.After(r.StaleLast) {
			r.StaleLast = e.Time
		}
		a.add(a.staleRoutes, route)
	}
	if (e.Cache == "HIT" || e.Cache == "STALE" || e.Cache == "UPDATING") && (monitorAgent().MatchString(e.Agent) || IsHealthPath(e.Path)) {
		r.MonitorCached++
		if r.MonitorExample == "" || (e.Cache == "STALE" && !strings.Contains(r.MonitorExample, " STALE")) {
			r.MonitorExample = clip(line)
		}
	}
}

func clip(s string) string {
	if len(s) > 600 {
		return strings.ToValidUTF8(s[:600], "?") + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

// Read streams one log (plain or gzip, detected by magic bytes) into the
// Analyzer, stopping early when ctx is done.
func (a *Analyzer) Read(ctx context.Context, r io.Reader, name string) error {
	br := bufio.NewReaderSize(r, 64<<10)
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("%s: looks gzip-compressed but cannot be read: %w", name, err)
		}
		defer zr.Close()
		br = bufio.NewReaderSize(zr, 64<<10)
	}
	a.res.Files = append(a.res.Files, name)
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 0; sc.Scan(); n++ {
		if n%65536 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		a.Line(sc.Text())
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: after %d lines: %w (lines longer than 1 MiB are not supported)", name, a.res.Lines, err)
	}
	return nil
}

// Result returns what was found so far.
func (a *Analyzer) Result() *Result {
	r := a.res
	r.ByStatus = make(map[int]int64, len(a.res.ByStatus))
	for k, v := range a.res.ByStatus {
		r.ByStatus[k] = v
	}
	r.Files = append([]string(nil), a.res.Files...)
	r.StaleRoutes, r.Clients5xx, r.Routes5xx = top(a.staleRoutes), top(a.clients5), top(a.routes5)
	return &r
}

func top(m map[string]int64) []Count {
	out := make([]Count, 0, len(m))
	for k, v := range m {
		out = append(out, Count{k, v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].N != out[j].N {
			return out[i].N > out[j].N
		}
		return out[i].Key < out[j].Key
	})
	if len(out) > 5 {
		out = out[:5]
	}
	return out
}
