package proxy

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/wire/grpcwire"
)

// gRPC through the one request path (docs/protocols.md). A gRPC call is an
// HTTP/2 POST whose status travels in grpc-status: in the headers of a
// trailers-only answer, or in the trailers after the messages. So:
//
//   - grpc-timeout is the call's deadline, capped by the route's total
//     timeout, and the backend is told the deadline that applies;
//   - the outcome of an attempt is read from grpc-status: UNAVAILABLE
//     counts like a 503, INTERNAL, UNKNOWN and DATA_LOSS like a 500 (each
//     when the pool's fail_statuses list that status), DEADLINE_EXCEEDED
//     like a response timeout; the codes that are the caller's
//     (INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, ...) are never
//     charged. A status that comes in the trailers is recorded when the
//     call ends;
//   - every answer sturdy makes itself (sorry page, shed, edge and
//     upstream errors) is a trailers-only gRPC answer with grpc-status,
//     grpc-message and, when the HTTP answer would carry Retry-After,
//     grpc-retry-pushback-ms; never an HTML page a gRPC client cannot
//     read.

// gRPC status codes (google.golang.org/grpc/codes).
const (
	grpcOK                 = 0
	grpcUnknown            = 2
	grpcDeadlineExceeded   = 4
	grpcPermissionDenied   = 7
	grpcResourceExhausted  = 8
	grpcUnimplemented      = 12
	grpcInternal           = 13
	grpcUnavailable        = 14
	grpcDataLoss           = 15
	grpcUnauthenticated    = 16
	grpcContentType        = "application/grpc"
	grpcPushbackHeader     = "Grpc-Retry-Pushback-Ms"
	grpcCallerDeadlineNote = "the call's deadline (grpc-timeout) passed"
)

// grpcCall is what the request path keeps about a gRPC call; nil for
// every other request.
type grpcCall struct {
	// deadline is the caller's own (grpc-timeout), when it is earlier
	// than the route's: its passing is the caller's giving up.
	deadline time.Time
	// late is set when the answer's status will come in its trailers:
	// the attempt is recorded when the body ends.
	late bool
}

// isGRPC reports whether a request is a gRPC call (not gRPC-Web, which
// is ordinary HTTP to a proxy).
func isGRPC(r *http.Request) bool {
	if r.ProtoMajor < 2 {
		return false
	}
	ct := r.Header["Content-Type"]
	if len(ct) == 0 || !strings.HasPrefix(ct[0], grpcContentType) {
		return false
	}
	rest := ct[0][len(grpcContentType):]
	return rest == "" || rest[0] == '+' || rest[0] == ';'
}

// grpcWriter marks the response of a gRPC call, so that sturdy's own
// answers (writeText, sorry) take the gRPC form whatever wraps it later.
type grpcWriter struct{ http.ResponseWriter }

func (g *grpcWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

func (g *grpcWriter) Flush() {
	if fl, ok := g.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// grpcWrap marks w when r is a gRPC call; other requests pay one
// comparison (HTTP/1.x) or one header lookup.
func grpcWrap(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
	if isGRPC(r) {
		return &grpcWriter{w}
	}
	return w
}

// asGRPC finds the gRPC mark under any wrappers; nil when there is none.
func asGRPC(w http.ResponseWriter) *grpcWriter {
	for {
		switch x := w.(type) {
		case *grpcWriter:
			return x
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return nil
		}
	}
}

// writeGRPCStatus answers a gRPC call trailers-only with code and msg,
// standing for the HTTP answer status (which it returns, for the route's
// counters and the access log). A Retry-After already set becomes the
// retry pushback.
func writeGRPCStatus(w http.ResponseWriter, status, code int, msg string) int {
	h := w.Header()
	if ra := h["Retry-After"]; len(ra) > 0 {
		if s, err := strconv.Atoi(ra[0]); err == nil {
			h[grpcPushbackHeader] = []string{strconv.Itoa(s * 1000)}
		}
		delete(h, "Retry-After")
	}
	delete(h, "Content-Length")
	h["Content-Type"] = []string{grpcContentType}
	h["Grpc-Status"] = []string{strconv.Itoa(code)}
	h["Grpc-Message"] = []string{grpcEncodeMessage(msg)}
	w.WriteHeader(http.StatusOK)
	return status
}

// grpcCodeFor is the gRPC code of an HTTP answer of sturdy's own, after
// gRPC's HTTP-to-gRPC mapping (doc/http-grpc-status-mapping.md), except
// that sturdy's 504 is a deadline and its 413 a resource limit.
func grpcCodeFor(status int) int {
	switch status {
	case http.StatusBadRequest:
		return grpcInternal
	case http.StatusUnauthorized:
		return grpcUnauthenticated
	case http.StatusForbidden:
		return grpcPermissionDenied
	case http.StatusNotFound:
		return grpcUnimplemented
	case http.StatusRequestEntityTooLarge:
		return grpcResourceExhausted
	case http.StatusGatewayTimeout:
		return grpcDeadlineExceeded
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable:
		return grpcUnavailable
	}
	return grpcUnknown
}

// grpcEncodeMessage percent-encodes msg as grpc-message wants.
func grpcEncodeMessage(msg string) string {
	msg = strings.TrimSpace(msg)
	var b strings.Builder
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c >= 0x20 && c <= 0x7e && c != '%' {
			b.WriteByte(c)
			continue
		}
		b.WriteString("%" + strings.ToUpper(strconv.FormatUint(uint64(c)>>4, 16)+strconv.FormatUint(uint64(c)&15, 16)))
	}
	return b.String()
}

// grpcTimeout reads the caller's grpc-timeout.
func grpcTimeout(h http.Header) (time.Duration, bool) {
	v := h["Grpc-Timeout"]
	if len(v) == 0 {
		return 0, false
	}
	return grpcwire.ParseTimeout(v[0])
}

// grpcUnreachable answers a gRPC call on a route none of whose pools
// speaks HTTP/2. It is the config's fault, so it is charged to no host;
// the route's counters see a 501 and the log says why, aggregated.
func (f *forwarder) grpcUnreachable() int {
	if f.rt.Agg != nil {
		f.rt.Agg.Add(f.rt.noGRPCNote)
	}
	return writeGRPCStatus(f.w, http.StatusNotImplemented, grpcUnimplemented,
		"route "+f.rt.Name+" cannot carry gRPC: its pools speak HTTP/1.1")
}

// grpcStart begins a gRPC call: its deadline (grpc-timeout within the
// route's) on ctx. The returned cancel must be called.
func (f *forwarder) grpcStart() context.CancelFunc {
	g := &grpcCall{}
	f.grpc = g
	d, ok := grpcTimeout(f.r.Header)
	if !ok {
		return func() {}
	}
	g.deadline = f.now.Add(d)
	if dl, has := f.ctx.Deadline(); has && !g.deadline.Before(dl) {
		g.deadline = time.Time{} // the route's deadline comes first: it is not the caller's
	}
	ctx, cancel := context.WithTimeout(f.ctx, d)
	f.ctx = ctx
	return cancel
}

// grpcOutbound tells the backend the deadline that applies.
func (f *forwarder) grpcOutbound(h http.Header) {
	if dl, ok := f.ctx.Deadline(); ok {
		h["Grpc-Timeout"] = []string{grpcwire.FormatTimeout(time.Until(dl))}
	}
}

// callerGone reports whether the caller's own deadline has passed: a
// failure after it is the caller's giving up, charged to no backend.
func (f *forwarder) callerGone() bool {
	return f.grpc != nil && !f.grpc.deadline.IsZero() && !time.Now().Before(f.grpc.deadline)
}

// grpcClass is the outcome of an attempt that got resp, from its
// grpc-status when the headers carry one (trailers-only); otherwise the
// status comes in the trailers and the attempt is recorded then.
func (f *forwarder) grpcClass(p *health.Pool, resp *http.Response) (outcome.Class, int) {
	v := resp.Header["Grpc-Status"]
	if len(v) == 0 {
		if resp.StatusCode == http.StatusOK {
			f.grpc.late = true
		}
		return outcome.OK, resp.StatusCode
	}
	return f.grpcOutcome(p, v[0])
}

// grpcOutcome maps a grpc-status to an outcome class and the HTTP status
// it stands for. DEADLINE_EXCEEDED after the caller's own deadline is
// the backend honouring it, not a failure.
func (f *forwarder) grpcOutcome(p *health.Pool, code string) (outcome.Class, int) {
	n, _ := strconv.Atoi(code)
	status := 0
	switch n {
	case grpcUnavailable:
		status = http.StatusServiceUnavailable
	case grpcInternal, grpcUnknown, grpcDataLoss:
		status = http.StatusInternalServerError
	case grpcDeadlineExceeded:
		if f.callerGone() {
			return outcome.OK, http.StatusGatewayTimeout
		}
		return outcome.ResponseTimeout, http.StatusGatewayTimeout
	default:
		return outcome.OK, http.StatusOK // OK, or the caller's own error
	}
	if p.FailStatus(status) {
		return outcome.Status5xx, status
	}
	return outcome.OK, status
}

// grpcSettle records an attempt whose status came in the trailers, once
// the call has ended.
func (f *forwarder) grpcSettle(p *health.Pool, host *health.Host, trailer http.Header) {
	f.grpc.late = false
	code := "0"
	if v := trailer["Grpc-Status"]; len(v) > 0 {
		code = v[0]
	}
	class, status := f.grpcOutcome(p, code)
	f.class = class
	hr := f.healthRequest()
	now := time.Now()
	if class == outcome.OK {
		p.Record(host, class, &hr, now)
		return
	}
	f.attr = p.Settle(&hr, []health.Failure{{Host: host, Class: class, Status: status}}, false, now)
}

// grpcAnswer answers a failed gRPC call whose caller's deadline passed:
// DEADLINE_EXCEEDED, not the silence a departed client gets. 0 otherwise.
func (f *forwarder) grpcAnswer(fl failure) int {
	if f.grpc == nil || fl != failCancel || f.r.Context().Err() != nil {
		return 0
	}
	f.status = writeGRPCStatus(f.w, http.StatusGatewayTimeout, grpcDeadlineExceeded, "route "+strconv.Quote(f.rt.Name)+": "+grpcCallerDeadlineNote)
	return f.status
}

// grpcSorry is the sorry page of a gRPC call: UNAVAILABLE with the sorry
// page's Retry-After as the retry pushback.
func (f *forwarder) grpcSorry(g *grpcWriter) int {
	g.Header()["Retry-After"] = []string{f.rt.Sorry.RetryAfter}
	return writeGRPCStatus(g, f.rt.Sorry.Status, grpcUnavailable, "route "+strconv.Quote(f.rt.Name)+": no backend can answer now; try again later")
}
