package proxy

import (
	"crypto/tls"
	"time"

	"github.com/sturdyproxy/sturdy/internal/proxy/accesslog"
)

// Aggregator counts repeated conditions and logs them as one line per
// interval (see internal/ops/logagg). Add must be cheap and must not block.
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
// once (the aggregated log keys, its pool as a backend). Call it after
// filling the route.
func (rt *Route) Prepare() {
	for i, n := range answerNotes {
		rt.notes[i] = "requests on route " + rt.Name + " " + n
	}
	rt.single = Backend{Pool: rt.Pool, Upstream: rt.Upstream, Fallback: rt.Fallback,
		HashKind: rt.HashKind, HashName: rt.HashName, Host: rt.HostHeader, Weight: 1}
	for r, n := range faultNotes {
		rt.faultNotes[r] = "route " + rt.Name + ": " + n
	}
	rt.noGRPCNote = "gRPC calls on route " + rt.Name + " answered UNIMPLEMENTED: its pools speak HTTP/1.1, and gRPC needs protocol h2c or h2"
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
		Attempts:    f.tried.Len(),
		Status:      f.status,
		Bytes:       f.bytes,
		Duration:    d,
		Cache:       f.cacheStatus,
		Answer:      "normal",
		RequestID:   f.reqID,
		Format:      f.snap.AccessFormat,
	}
	switch {
	case f.pool != nil:
		rec.Pool = f.pool.Name
	case f.rt.Pool != nil:
		rec.Pool = f.rt.Pool.Name
	}
	if rec.Client == "" {
		rec.Client = clientKey(r, f.snap.ClientHeader, f.peerTrusted(), f.snap.Trusted)
	}
	if f.rw != nil && f.rw.wrote && f.rw.sent != f.status {
		// An error page answered: the client got its status, the
		// backend's is kept beside it.
		rec.Status, rec.UpstreamStatus = f.rw.sent, f.status
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
	if fm := rec.Format; fm != nil {
		f.extendRecord(&rec, fm)
	}
	l.Log(rec)
}

// extendRecord fills the fields beyond the default ones that fm writes.
func (f *forwarder) extendRecord(rec *accesslog.Record, fm *accesslog.Format) {
	r := f.r
	rec.RequestURI, rec.Query, rec.Proto = r.RequestURI, r.URL.RawQuery, r.Proto
	rec.UserAgent, rec.Referer = r.Header.Get("User-Agent"), r.Header.Get("Referer")
	if r.TLS != nil && fm.Wants(accesslog.FieldTLSVersion) {
		rec.TLSVersion = tls.VersionName(r.TLS.Version)
	}
	rec.RemoteUser = f.admission.User
	if rec.UpstreamStatus == 0 && rec.Attempts > 0 && fm.Wants(accesslog.FieldUpstreamStatus) {
		rec.UpstreamStatus = f.status
	}
	switch {
	case f.buffered != nil:
		rec.BytesIn = int64(len(f.buffered))
	case f.body != nil:
		rec.BytesIn = f.body.read.Load()
	}
	if t := f.times; t != nil && rec.Attempts > 0 {
		rec.UpstreamConnect = time.Duration(t.connect.Load())
		rec.UpstreamHeader = t.hdr
		rec.UpstreamTotal = time.Since(t.begin)
	}
}
