package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx/errlog"
)

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

const width = 100

// WriteText writes the report for a terminal: findings grouped by
// severity with their evidence, then the log summaries.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "sturdy doctor nginx: %d high, %d medium, %d low\n", r.Summary.High, r.Summary.Medium, r.Summary.Low)
	if r.Config != "" {
		fmt.Fprintf(&b, "config:     %s (%s)\n", r.Config, plural(len(r.Files), "file", "files"))
	}
	if el := r.ErrorLog; el != nil {
		for _, f := range el.Files {
			fmt.Fprintf(&b, "error log:  %s (%s, %s", f.Name, plural(int(f.Lines), "line", "lines"), fmtBytes(float64(f.Bytes)))
			if f.Gzip {
				b.WriteString(" uncompressed")
			}
			b.WriteString(")\n")
		}
	}
	if al := r.AccessLog; al != nil {
		for _, f := range al.Files {
			fmt.Fprintf(&b, "access log: %s\n", f)
		}
	}
	n := 0
	for _, sev := range []Severity{High, Medium, Low} {
		first := true
		for _, f := range r.Findings {
			if f.Severity != sev {
				continue
			}
			if first {
				fmt.Fprintf(&b, "\n%s\n", strings.ToUpper(sev.String()))
				first = false
			}
			n++
			writeFinding(&b, n, f)
		}
	}
	if len(r.Findings) == 0 {
		b.WriteString("\nNo findings.\n")
	}
	if r.ErrorLog != nil {
		writeErrorLog(&b, r.ErrorLog)
	}
	if al := r.AccessLog; al != nil {
		fmt.Fprintf(&b, "\nACCESS LOG\n  %d lines (%d parsed), %d answers 5xx, %d served STALE, %d monitor or health-check answers from the cache\n", al.Lines, al.Parsed, al.Status5xx, al.Stale, al.MonitorCached)
		if len(al.Clients5xx) > 0 {
			fmt.Fprintf(&b, "  5xx by client: %s\n  5xx by route:  %s\n", accessCounts(al.Clients5xx), accessCounts(al.Routes5xx))
		}
	}
	if len(r.Notes) > 0 {
		b.WriteString("\nNOTES\n")
		for _, n := range r.Notes {
			b.WriteString("  " + n + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeFinding(b *strings.Builder, n int, f Finding) {
	head := fmt.Sprintf("%d. ", n)
	wrap(b, head, strings.Repeat(" ", len(head)), f.Title)
	ind := strings.Repeat(" ", len(head))
	field := func(name, text string) {
		if text != "" {
			wrap(b, ind+fmt.Sprintf("%-9s ", name), ind+strings.Repeat(" ", 10), text)
		}
	}
	field("id", f.ID)
	field("at", f.Pos())
	field("incident", f.Incident)
	field("why", f.Why)
	field("fix", f.NginxFix)
	field("sturdy", f.Sturdy)
	if len(f.Evidence) > 0 {
		b.WriteString(ind + "evidence\n")
		for _, e := range f.Evidence {
			b.WriteString(ind + "  " + e + "\n")
		}
	}
}

// wrap writes text word-wrapped at width, the first line after first and
// the rest after rest.
func wrap(b *strings.Builder, first, rest, text string) {
	line := first
	empty := true
	for _, word := range strings.Fields(text) {
		if !empty && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line, empty = rest, true
		}
		if !empty {
			line += " "
		}
		line += word
		empty = false
	}
	b.WriteString(line + "\n")
}

// short names for timeline columns.
var shortKind = map[string]string{
	errlog.NoLive.String():         "no-live",
	errlog.TimedOut.String():       "timeout",
	errlog.PrematureClose.String(): "closed",
	errlog.ConnectFailed.String():  "connect",
	errlog.Reset.String():          "reset",
	errlog.InvalidHeader.String():  "invalid",
	errlog.Disabled.String():       "disabled",
	errlog.Resolve.String():        "dns",
	errlog.WorkerConns.String():    "workers",
}

func writeErrorLog(b *strings.Builder, el *errlog.Result) {
	b.WriteString("\nERROR LOG\n")
	if !el.First.IsZero() {
		fmt.Fprintf(b, "  %d lines, %s, from %s to %s\n", el.Lines, fmtBytes(float64(el.Bytes)), el.First.Format("2006/01/02 15:04:05"), el.Last.Format("2006/01/02 15:04:05"))
	}
	if len(el.Kinds) == 0 {
		b.WriteString("  no upstream-related lines\n")
		return
	}
	fmt.Fprintf(b, "  %-40s %8s  %s\n", "kind", "count", "by upstream")
	for _, k := range el.Kinds {
		fmt.Fprintf(b, "  %-40s %8d  %s\n", k.Kind, k.Total, counts(k.ByUpstream, 0))
	}
	if len(el.Episodes) > 0 {
		b.WriteString("  episodes without a live server\n")
		for i, ep := range el.Episodes {
			if i == 10 {
				fmt.Fprintf(b, "    (%d more in --json)\n", len(el.Episodes)-10)
				break
			}
			fmt.Fprintf(b, "    %-14s %s to %s (%s): %d \"no live upstreams\" to %d clients, %d upstream errors, log %s/h\n",
				ep.Upstream, ep.Start.Format("01/02 15:04:05"), ep.End.Format("15:04:05"), fmtSpan(ep.Duration()), ep.NoLive, ep.Victims, ep.Errors, fmtBytes(perHour(ep.Bytes, ep.Duration())))
		}
	}
	if len(el.Backends) > 0 {
		b.WriteString("  backends with upstream errors\n")
		for _, bs := range el.Backends {
			fmt.Fprintf(b, "    %-22s %6d errors from %s to %s, %d clients, %d routes\n", bs.Addr, bs.Errors, bs.First.Format("15:04:05"), bs.Last.Format("15:04:05"), bs.DistinctClients, bs.DistinctRoutes)
		}
	}
	writeTimeline(b, el)
}

// bucket sizes for the timeline, smallest first; the first that fits the
// non-empty buckets in maxRows is used.
var buckets = []time.Duration{time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 3 * time.Hour, 6 * time.Hour, 24 * time.Hour}

const maxRows = 30

type row struct {
	t     time.Time
	bytes int64
	kinds map[string]int
}

func writeTimeline(b *strings.Builder, el *errlog.Result) {
	var rows []row
	var size time.Duration
	for _, size = range buckets {
		rows = bucketize(el.Timeline, size)
		if len(rows) <= maxRows {
			break
		}
	}
	if len(rows) == 0 {
		return
	}
	var cols []string
	for _, k := range el.Kinds {
		cols = append(cols, k.Kind)
	}
	label := "minute"
	if size > time.Minute {
		label = fmtSpan(size)
	}
	fmt.Fprintf(b, "  timeline (per %s; full per-minute timeline in --json)\n    %-16s", label, "time")
	for _, c := range cols {
		fmt.Fprintf(b, " %9s", shortKind[c])
	}
	fmt.Fprintf(b, " %11s\n", "log")
	shown := rows
	if len(shown) > maxRows {
		shown = shown[:maxRows]
	}
	for _, r := range shown {
		fmt.Fprintf(b, "    %-16s", r.t.Format("2006/01/02 15:04"))
		for _, c := range cols {
			fmt.Fprintf(b, " %9d", r.kinds[c])
		}
		fmt.Fprintf(b, " %11s\n", fmtBytes(float64(r.bytes)))
	}
	if len(rows) > len(shown) {
		fmt.Fprintf(b, "    (%d more rows in --json)\n", len(rows)-len(shown))
	}
}

// bucketize sums minutes into buckets of size, keeping only buckets with
// classified lines.
func bucketize(tl []errlog.Minute, size time.Duration) []row {
	var rows []row
	for _, m := range tl {
		if len(m.Kinds) == 0 {
			continue
		}
		t := m.Time.Truncate(size)
		if len(rows) == 0 || !rows[len(rows)-1].t.Equal(t) {
			rows = append(rows, row{t: t, kinds: map[string]int{}})
		}
		r := &rows[len(rows)-1]
		r.bytes += m.Bytes
		for k, n := range m.Kinds {
			r.kinds[k] += n
		}
	}
	return rows
}
