package errlog

import (
	"bytes"
	"sort"
	"strconv"
	"time"
)

// Options tune an Analyzer. The zero value works.
type Options struct {
	// UpstreamOf names the upstream block that a backend address
	// ("10.0.0.1:8080") belongs to, from the nginx config. Nil, or "" for an
	// address, means unknown: such errors count towards every episode.
	UpstreamOf func(addr string) string
	// EpisodeGap ends an episode when no "no live upstreams" line for its
	// upstream came for this long. Default 2m.
	EpisodeGap time.Duration
	// Lookback is how far before an episode's first "no live upstreams"
	// the upstream errors that ejected the servers are looked for. Default 60s.
	Lookback time.Duration
	// MaxKeys bounds the distinct clients, routes and backends tracked per
	// episode, the upstreams per kind and the backends. Default 4096.
	MaxKeys int
	// MaxMinutes bounds the timeline. Default 50000 (about 35 days).
	MaxMinutes int
	// MaxEpisodes bounds the episodes kept. Default 500.
	MaxEpisodes int
}

func (o Options) withDefaults() Options {
	if o.EpisodeGap <= 0 {
		o.EpisodeGap = 2 * time.Minute
	}
	if o.Lookback <= 0 {
		o.Lookback = time.Minute
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = 4096
	}
	if o.MaxMinutes <= 0 {
		o.MaxMinutes = 50000
	}
	if o.MaxEpisodes <= 0 {
		o.MaxEpisodes = 500
	}
	return o
}

// Bounds on what is kept per line and per episode.
const (
	maxRecent      = 4096 // upstream errors remembered for an episode's lookback
	maxExampleLen  = 600  // bytes of a line kept as evidence
	maxExamples    = 3
	recentConnKeep = 256  // connection numbers of recent errors (to skip the "disabled" echo)
	maxOpen        = 32   // episodes open at once (one per upstream)
	backendKeys    = 64   // distinct clients and routes tracked per backend
	maxBackends    = 1024 // backends tracked
)

// Analyzer aggregates error-log lines. It is not safe for concurrent use.
type Analyzer struct {
	opt Options

	files       []File
	cur         *File // the file being read, for positions
	lines       int64
	parsed      int64
	bytes       int64
	first, last time.Time

	minutes   map[int64]*minute
	truncated bool
	kinds     [numKinds]*kindTotal

	backends    map[string]*BackendStat // upstream errors per backend address, bounded by MaxKeys
	backendsOff int                     // errors of backends beyond the bound
	recent      []event                 // ring of recent upstream errors, oldest first
	recentConns []int64
	open        map[string]*episodeState
	closed      []Episode
	dropped     int
}

type minute struct {
	bytes int64
	n     [numKinds]int
}

type kindTotal struct {
	total      int
	byUpstream *counter
	example    string
}

// event is an upstream error, kept with its strings copied.
type event struct {
	t          time.Time
	kind       Kind
	upstream   string // upstream block name, "" when unknown
	backend    string
	client     string
	route      string
	nonASCII   bool
	echo       bool
	connecting bool
	// raw is the start of the line; file and lineNo its position. The
	// evidence text is made from them only when the event becomes an example.
	raw    []byte
	file   string
	lineNo int64
}

// text renders the event as evidence: "file:line: text".
func (ev *event) text() string {
	if ev.file == "" {
		return clip(ev.raw)
	}
	return ev.file + ":" + strconv.FormatInt(ev.lineNo, 10) + ": " + clip(ev.raw)
}

type episodeState struct {
	Episode
	clients, routes, backends, victims *counter
	kinds                              [numKinds]int
	last                               time.Time
}

// New returns an Analyzer.
func New(opt Options) *Analyzer {
	opt = opt.withDefaults()
	a := &Analyzer{opt: opt, minutes: map[int64]*minute{}, open: map[string]*episodeState{}, backends: map[string]*BackendStat{}}
	for k := range a.kinds {
		a.kinds[k] = &kindTotal{byUpstream: newCounter(opt.MaxKeys)}
	}
	return a
}

// Line feeds one line (without its newline); size is its length on disk
// including the newline.
func (a *Analyzer) Line(line []byte, size int) {
	a.lines++
	a.bytes += int64(size)
	e, ok := ParseLine(line)
	if !ok {
		if !a.last.IsZero() {
			a.minuteOf(a.last).bytes += int64(size)
		}
		return
	}
	a.parsed++
	if a.first.IsZero() || e.Time.Before(a.first) {
		a.first = e.Time
	}
	if e.Time.After(a.last) {
		a.last = e.Time
	}
	a.closeIdle(e.Time)
	m := a.minuteOf(e.Time)
	m.bytes += int64(size)
	m.n[e.Kind]++
	if e.Kind == Other {
		return
	}
	up := a.upstreamOf(&e)
	kt := a.kinds[e.Kind]
	kt.total++
	kt.byUpstream.add(up, 1)
	if kt.example == "" {
		kt.example = a.pos() + clip(line)
	}
	switch {
	case e.Kind == NoLive:
		a.noLive(&e, up, line)
	case e.Kind.UpstreamError():
		a.upstreamError(&e, up, line)
	}
}

func (a *Analyzer) upstreamOf(e *Entry) string {
	host := string(UpstreamHost(e.Upstream))
	if e.Kind == NoLive || a.opt.UpstreamOf == nil {
		return host
	}
	if name := a.opt.UpstreamOf(host); name != "" {
		return name
	}
	return host
}

func (a *Analyzer) minuteOf(t time.Time) *minute {
	k := t.Unix() / 60
	m, ok := a.minutes[k]
	if ok {
		return m
	}
	if len(a.minutes) >= a.opt.MaxMinutes {
		a.truncated = true
		return &minute{} // counted in totals, not in the timeline
	}
	m = &minute{}
	a.minutes[k] = m
	return m
}

// echo reports whether conn had an upstream error logged recently.
func (a *Analyzer) echo(conn int64) bool {
	if conn == 0 {
		return false
	}
	for _, c := range a.recentConns {
		if c == conn {
			return true
		}
	}
	return false
}

func (a *Analyzer) upstreamError(e *Entry, up string, line []byte) {
	ev := event{
		t:          e.Time,
		kind:       e.Kind,
		upstream:   up,
		backend:    string(UpstreamHost(e.Upstream)),
		client:     string(e.Client),
		route:      string(RequestRoute(e.Request)),
		nonASCII:   NonASCII(e.Request),
		raw:        bytes.Clone(line[:min(len(line), maxExampleLen+1)]),
		file:       a.curName(),
		lineNo:     a.curLine(),
		connecting: e.Connecting || e.Kind == ConnectFailed,
		// nginx logs the failure itself, then "temporarily disabled" for
		// the same connection when it ejects the server: count that line
		// as an ejection, not as a second error.
		echo: e.Kind == Disabled && a.echo(e.Conn),
	}
	if ev.upstream == ev.backend {
		ev.upstream = "" // an address no upstream block is known to hold: may belong to any pool
	}
	if !ev.echo {
		a.backendError(&ev)
	}
	if e.Conn != 0 {
		if len(a.recentConns) >= recentConnKeep {
			a.recentConns = a.recentConns[1:]
		}
		a.recentConns = append(a.recentConns, e.Conn)
	}
	if len(a.recent) >= maxRecent {
		a.recent = a.recent[1:]
	}
	a.recent = append(a.recent, ev)
	for _, ep := range a.open {
		if ev.upstream == "" || ev.upstream == ep.Upstream {
			ep.add(&ev)
		}
	}
}

func (a *Analyzer) backendError(ev *event) {
	b, ok := a.backends[ev.backend]
	if !ok {
		if len(a.backends) >= maxBackends {
			a.backendsOff++
			return
		}
		b = &BackendStat{Addr: ev.backend, Upstream: ev.upstream, First: ev.t, clients: newCounter(backendKeys), routes: newCounter(backendKeys)}
		a.backends[ev.backend] = b
	}
	b.Errors++
	if ev.t.Before(b.First) {
		b.First = ev.t
	}
	if ev.t.After(b.Last) {
		b.Last = ev.t
	}
	b.clients.add(ev.client, 1)
	b.routes.add(ev.route, 1)
	if len(b.Examples) < 1 {
		b.Examples = append(b.Examples, ev.text())
	}
}

func (a *Analyzer) noLive(e *Entry, up string, line []byte) {
	ep, ok := a.open[up]
	if !ok {
		if len(a.open) >= maxOpen {
			a.dropped++
			return
		}
		ep = &episodeState{
			Episode:  Episode{Upstream: up, Start: e.Time, FirstLine: a.pos() + clip(line)},
			clients:  newCounter(a.opt.MaxKeys),
			routes:   newCounter(a.opt.MaxKeys),
			backends: newCounter(a.opt.MaxKeys),
			victims:  newCounter(a.opt.MaxKeys),
		}
		a.open[up] = ep
		from := e.Time.Add(-a.opt.Lookback)
		for i := range a.recent {
			ev := &a.recent[i]
			if !ev.t.Before(from) && (ev.upstream == "" || ev.upstream == up) {
				ep.add(ev)
			}
		}
	}
	ep.NoLive++
	ep.End, ep.last = e.Time, e.Time
	ep.victims.add(string(e.Client), 1)
}

func (ep *episodeState) add(ev *event) {
	if ev.kind == Disabled {
		ep.Ejections++
		if ev.echo {
			return
		}
	}
	ep.Errors++
	if ev.connecting {
		ep.Connecting++
	}
	if ev.nonASCII {
		ep.NonASCII++
	}
	ep.kinds[ev.kind]++
	ep.clients.add(ev.client, 1)
	ep.routes.add(ev.route, 1)
	ep.backends.add(ev.backend, 1)
	if len(ep.Examples) < maxExamples {
		ep.Examples = append(ep.Examples, ev.text())
	}
	if ev.nonASCII && ep.NonASCIIExample == "" {
		ep.NonASCIIExample = ev.text()
	}
}

// closeIdle ends the episodes that saw no "no live upstreams" line for
// EpisodeGap before t.
func (a *Analyzer) closeIdle(t time.Time) {
	for up, ep := range a.open {
		if t.Sub(ep.last) > a.opt.EpisodeGap {
			a.finish(ep)
			delete(a.open, up)
		}
	}
}

// finish keeps a closed episode's summary; its counters are released.
func (a *Analyzer) finish(ep *episodeState) {
	if len(a.closed) >= a.opt.MaxEpisodes {
		a.dropped++
		return
	}
	a.closed = append(a.closed, ep.summary())
}

// summary is the episode with its top keys and distinct counts.
func (ep *episodeState) summary() Episode {
	e := ep.Episode
	e.Examples = append([]string(nil), e.Examples...)
	e.Victims = ep.victims.distinct()
	for k, n := range ep.kinds {
		if n > 0 {
			e.ByKind = append(e.ByKind, Count{Kind(k).String(), n})
		}
	}
	sort.SliceStable(e.ByKind, func(i, j int) bool { return e.ByKind[i].N > e.ByKind[j].N })
	e.Clients, e.Routes, e.Backends = ep.clients.top(topN), ep.routes.top(topN), ep.backends.top(topN)
	e.DistinctClients, e.DistinctRoutes, e.DistinctBackends = ep.clients.distinct(), ep.routes.distinct(), ep.backends.distinct()
	return e
}

// pos returns "file:line: " of the line being analysed, "" when lines are
// fed directly.
func (a *Analyzer) pos() string {
	if a.cur == nil {
		return ""
	}
	return a.cur.Name + ":" + strconv.FormatInt(a.cur.Lines, 10) + ": "
}

func (a *Analyzer) curName() string {
	if a.cur == nil {
		return ""
	}
	return a.cur.Name
}

func (a *Analyzer) curLine() int64 {
	if a.cur == nil {
		return 0
	}
	return a.cur.Lines
}

// clip copies a line for evidence: at most maxExampleLen bytes, with bytes
// outside printable ASCII written as \xNN (as nginx's access log does), so
// that raw bytes in a URL are visible and the report stays valid UTF-8.
func clip(line []byte) string {
	b := make([]byte, 0, min(len(line), maxExampleLen)+8)
	for i, c := range line {
		if i >= maxExampleLen {
			b = append(b, "..."...)
			break
		}
		if c < 0x20 || c >= 0x7f {
			b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
			continue
		}
		b = append(b, c)
	}
	return string(b)
}

const hexDigits = "0123456789ABCDEF"
