package proxy

import (
	"net/http"

	"github.com/sturdyproxy/sturdy/internal/edge"
)

// LocalErrors hears of sturdy's own resource exhaustion on the request
// path (see internal/ops/exhaust). UpstreamFailed must be cheap and must not
// block.
type LocalErrors interface {
	UpstreamFailed(err error)
}

// faultNotes are the aggregated log lines' texts for a route's client
// faults, per reason.
var faultNotes = map[edge.Reason]string{
	edge.FaultMalformedBody: "requests with a malformed body answered 400 (the client's fault; no backend charged)",
	edge.FaultShortBody:     "requests whose body ended before its length answered 400 (the client's fault; no backend charged)",
	edge.FaultBodyTimeout:   "requests whose client stopped sending the body cut after client_body timeout (no backend charged)",
	edge.FaultSendTimeout:   "responses whose client stopped reading cut after client_send timeout; the backend connection was released (no backend charged)",
}

// fault counts a client fault on the route: in the edge's counters and
// in the aggregated log.
func (f *forwarder) countFault(reason edge.Reason) {
	f.snap.Edge.C.Add(reason)
	if rt := f.rt; rt.Agg != nil {
		if n := rt.faultNotes[reason]; n != "" {
			rt.Agg.Add(n)
		}
	}
}

// answerFault answers a request whose body the client broke, and closes
// an HTTP/1.x connection (see closeAfter); on HTTP/2 and HTTP/3 only the
// stream is answered.
func (f *forwarder) answerFault() int {
	f.countFault(f.fault)
	if f.w == nil {
		return http.StatusBadRequest // a background fetch has no client
	}
	closeAfter(f.w, f.r)
	name := f.rt.Name
	switch f.fault {
	case edge.FaultBodyTimeout:
		return writeEdgeError(f.w, http.StatusRequestTimeout, name, "the request body stopped arriving; nothing was sent to any backend that could be kept")
	case edge.FaultShortBody:
		return writeEdgeError(f.w, http.StatusBadRequest, name, "the request body ended before its declared length")
	}
	why := "the request body is malformed (its chunked encoding or trailer does not parse)"
	if me, ok := f.bodyErr.(*malformedError); ok {
		why = "the request body is malformed: " + me.why
	}
	return writeEdgeError(f.w, http.StatusBadRequest, name, why)
}
