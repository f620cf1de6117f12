package proxy

import (
	"time"

	"github.com/sturdyproxy/sturdy/internal/accesslog"
)

// Aggregator counts repeated conditions and logs them as one line per
// interval (see internal/logagg). Add must be cheap and must not block.
type Aggregator interface {
	Add(key string)
}

// answerNotes are the aggregated log lines' texts, per answer kind.
var answerNotes = [numAnswers]string{
	AnswerPanic:    "answered by panic routing (every host was out on passive evidence)",
	AnswerFallback: "sent to the fallback pool (the route's pool was empty)",
	AnswerStale:    "answered with a stale cached copy",
	AnswerSorry:    "answered by the sorry page (no backend could answer)",
	AnswerShed:     "refused at once (a limit was full or the client is shed)",
}

// Prepare computes what the route needs per request that can be computed
// once (the aggregated log keys). Call it after filling the route.
func (rt *Route) Prepare() {
	for i, n := range answerNotes {
		rt.notes[i] = "requests on route " + rt.Name + " " + n
	}
}

// answered counts a request answered some other way than by a backend in
// rotation: in the route's counters, in the aggregated log, and in the
// request's own record.
func (f *forwarder) answered(kind int) {
	rt := f.rt
	rt.Stats.Answer(kind)
	if rt.Agg != nil {
		rt.Agg.Add(rt.notes[kind])
	}
	f.how = kind + 1
}

// logAccess writes the request's access log record, when the log is on.
func (f *forwarder) logAccess(l *accesslog.Logger, start time.Time, d time.Duration) {
	r := f.r
	rec := accesslog.Record{
		Time:        start,
		Client:      f.clientKey,
		Method:      r.Method,
		RequestHost: r.Host,
		Path:        r.URL.Path,
		Route:       f.rt.Name,
		Pool:        f.rt.Pool.Name,
		Attempts:    f.tried.Len(),
		Status:      f.status,
		Bytes:       f.bytes,
		Duration:    d,
		Cache:       f.cacheStatus,
		Answer:      "normal",
	}
	if f.host != nil {
		rec.Host = f.host.Addr
	}
	if rec.Attempts > 0 {
		rec.Outcome = f.class.String()
	}
	if f.attr != 0 {
		rec.Attribution = f.attr.String()
	}
	if f.how > 0 {
		rec.Answer = answerNames[f.how-1]
	}
	l.Log(rec)
}
