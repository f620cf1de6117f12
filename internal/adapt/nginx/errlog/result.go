package errlog

import (
	"sort"
	"time"
)

// Result is what an Analyzer found. Times are the log's wall-clock times
// (nginx writes local time without a zone), carried in UTC.
type Result struct {
	Files  []File `json:"files"`
	Lines  int64  `json:"lines"`
	Parsed int64  `json:"parsed_lines"`
	Bytes  int64  `json:"bytes"`
	// First and Last are the earliest and latest timestamps seen.
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
	// Kinds counts the classified lines, in Kind order, omitting absent kinds.
	Kinds []KindTotal `json:"kinds"`
	// Timeline has one entry per minute that had lines, in time order.
	Timeline []Minute `json:"timeline"`
	// TimelineTruncated reports that the log spanned more minutes than
	// Options.MaxMinutes; totals still count every line.
	TimelineTruncated bool `json:"timeline_truncated,omitempty"`
	// PeakMinute is the minute with the most error-log bytes.
	PeakMinute Minute `json:"peak_minute"`
	// Backends are the backend addresses with upstream errors, most first
	// (at most 10), for failures that never emptied a pool.
	Backends []BackendStat `json:"backends"`
	// Episodes are the periods in which an upstream had no live server.
	Episodes        []Episode `json:"episodes"`
	EpisodesDropped int       `json:"episodes_dropped,omitempty"`
}

// File is one log file that was read.
type File struct {
	Name string `json:"name"`
	Gzip bool   `json:"gzip,omitempty"`
	// Lines and Bytes are of the decompressed text.
	Lines int64 `json:"lines"`
	Bytes int64 `json:"bytes"`
	// LongLines counts lines longer than the read buffer; only their
	// start was analysed.
	LongLines int64 `json:"long_lines,omitempty"`
}

// KindTotal is how many lines of one kind the log had.
type KindTotal struct {
	Kind  string `json:"kind"`
	Total int    `json:"total"`
	// ByUpstream splits Total by upstream block name (or backend address
	// when the config does not say which block holds it), largest first.
	ByUpstream []Count `json:"by_upstream"`
	// Example is the first such line.
	Example string `json:"example"`
}

// BackendStat is the upstream errors of one backend address.
type BackendStat struct {
	Addr string `json:"addr"`
	// Upstream is the upstream block holding Addr, "" when unknown.
	Upstream string    `json:"upstream,omitempty"`
	Errors   int       `json:"errors"`
	First    time.Time `json:"first"`
	Last     time.Time `json:"last"`
	// DistinctClients and DistinctRoutes are exact up to 64, lower bounds above.
	DistinctClients int      `json:"distinct_clients"`
	DistinctRoutes  int      `json:"distinct_routes"`
	Examples        []string `json:"examples"`

	clients, routes *counter
}

// Minute is one minute of the log.
type Minute struct {
	Time  time.Time      `json:"time"`
	Bytes int64          `json:"bytes"`
	Kinds map[string]int `json:"kinds,omitempty"`
}

// Episode is a period in which nginx answered "no live upstreams" for one
// upstream, with the upstream errors from Lookback before its start to its
// end: the errors that ejected the servers and kept them out.
type Episode struct {
	Upstream  string    `json:"upstream"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	NoLive    int       `json:"no_live_upstreams"`
	FirstLine string    `json:"first_line"`
	// Victims are the distinct clients that got "no live upstreams".
	Victims int `json:"victims"`
	// Errors counts upstream errors; Ejections the "temporarily disabled"
	// lines among or beside them; NonASCII the errors whose request line
	// held bytes outside printable ASCII.
	Errors    int `json:"upstream_errors"`
	Ejections int `json:"ejections"`
	// Connecting counts errors before the request reached the backend
	// (connect() failed, timeouts while connecting): host evidence.
	Connecting      int     `json:"connecting"`
	NonASCII        int     `json:"non_ascii_requests"`
	NonASCIIExample string  `json:"non_ascii_example,omitempty"`
	ByKind          []Count `json:"by_kind"`
	// Top clients, routes ("METHOD /path") and backends of those errors.
	Clients          []Count  `json:"clients"`
	Routes           []Count  `json:"routes"`
	Backends         []Count  `json:"backends"`
	DistinctClients  int      `json:"distinct_clients"`
	DistinctRoutes   int      `json:"distinct_routes"`
	DistinctBackends int      `json:"distinct_backends"`
	Examples         []string `json:"examples"`
	// Bytes is the error log written during the episode (all lines).
	Bytes int64 `json:"log_bytes"`
}

// Duration is End - Start, at least one second.
func (e Episode) Duration() time.Duration {
	return max(e.End.Sub(e.Start), time.Second)
}

const topN = 5

// Result returns what was found so far. Episodes still open are included
// as they stand.
func (a *Analyzer) Result() *Result {
	r := &Result{
		Files: append([]File(nil), a.files...), Lines: a.lines, Parsed: a.parsed, Bytes: a.bytes,
		First: a.first, Last: a.last, TimelineTruncated: a.truncated, EpisodesDropped: a.dropped,
	}
	for k := Kind(1); k < numKinds; k++ {
		kt := a.kinds[k]
		if kt.total == 0 {
			continue
		}
		r.Kinds = append(r.Kinds, KindTotal{Kind: k.String(), Total: kt.total, ByUpstream: kt.byUpstream.top(topN), Example: kt.example})
	}
	for _, b := range a.backends {
		bs := *b
		bs.DistinctClients, bs.DistinctRoutes = b.clients.distinct(), b.routes.distinct()
		bs.Examples = append([]string(nil), b.Examples...)
		bs.clients, bs.routes = nil, nil
		r.Backends = append(r.Backends, bs)
	}
	sort.Slice(r.Backends, func(i, j int) bool {
		if r.Backends[i].Errors != r.Backends[j].Errors {
			return r.Backends[i].Errors > r.Backends[j].Errors
		}
		return r.Backends[i].Addr < r.Backends[j].Addr
	})
	if len(r.Backends) > 10 {
		r.Backends = r.Backends[:10]
	}
	keys := make([]int64, 0, len(a.minutes))
	for k := range a.minutes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, k := range keys {
		m := a.minutes[k]
		mm := Minute{Time: time.Unix(k*60, 0).UTC(), Bytes: m.bytes}
		for kind, n := range m.n {
			if n > 0 && Kind(kind) != Other {
				if mm.Kinds == nil {
					mm.Kinds = map[string]int{}
				}
				mm.Kinds[Kind(kind).String()] = n
			}
		}
		if mm.Bytes > r.PeakMinute.Bytes {
			r.PeakMinute = mm
		}
		r.Timeline = append(r.Timeline, mm)
	}
	eps := append([]Episode(nil), a.closed...)
	for _, ep := range a.open {
		eps = append(eps, ep.summary())
	}
	sort.Slice(eps, func(i, j int) bool {
		if !eps[i].Start.Equal(eps[j].Start) {
			return eps[i].Start.Before(eps[j].Start)
		}
		return eps[i].Upstream < eps[j].Upstream
	})
	for _, e := range eps {
		for _, k := range keys {
			t := time.Unix(k*60, 0).UTC()
			if !t.Before(e.Start.Truncate(time.Minute)) && !t.After(e.End) {
				e.Bytes += a.minutes[k].bytes
			}
		}
		r.Episodes = append(r.Episodes, e)
	}
	return r
}
