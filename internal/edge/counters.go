package edge

import "sync/atomic"

// Reason is one kind of decision about a request that no backend made: a
// refusal at the edge, a rewrite of the target, or a fault of the client's
// own (a broken body, ambiguous framing, a stall). The set is fixed, so
// that its names can be metric labels.
type Reason uint8

// Reasons. The order is stable; Names and Kinds index by it.
const (
	// Denied: the client's address is on the deny list (403).
	Denied Reason = iota
	// Reencoded: raw non-ASCII bytes in the target were percent-encoded.
	Reencoded
	// Normalized: the path was normalised: dot segments resolved, runs of
	// slashes merged, encoded unreserved characters decoded.
	Normalized
	// RejectControl: control characters in the request target (400).
	RejectControl
	// RejectNonASCII: raw non-ASCII bytes with edge.non_ascii: reject (400).
	RejectNonASCII
	// RejectEscape: a broken percent-encoding in the path (400).
	RejectEscape
	// RejectNUL: %00 in the path (400).
	RejectNUL
	// RejectSlash: an encoded slash or backslash in the path of a route
	// that does not allow them, or one that makes a dot segment (400).
	RejectSlash
	// RejectParams: path parameters (";...") that would route the request
	// elsewhere once a backend removed them (400).
	RejectParams
	// RejectLoop: the request came through this sturdy too often (508).
	RejectLoop
	// RejectTooLarge: the body is larger than the route allows (413).
	RejectTooLarge
	// FaultMalformedBody: the body does not parse (bad chunk size, bare LF,
	// data longer than its chunk, a bad trailer, ...) (400).
	FaultMalformedBody
	// FaultShortBody: the body ended before its Content-Length (400).
	FaultShortBody
	// FaultBodyTimeout: the client stopped sending its body (408).
	FaultBodyTimeout
	// FaultSendTimeout: the client stopped reading the response (cut).
	FaultSendTimeout
	// FaultFraming: the request's framing is ambiguous (Content-Length with
	// Transfer-Encoding, a folded framing header, Transfer-Encoding on
	// HTTP/1.0, ...) (400 and close).
	FaultFraming
	// DroppedUnderscore: header fields whose names hold "_" were dropped
	// (nginx underscores_in_headers off), once per request: backends that
	// map "_" to "-" (CGI, WSGI, Rack) cannot tell X_Real_IP from the
	// X-Real-IP sturdy sets.
	DroppedUnderscore
	// DroppedTrailer: request trailer fields that may not be trailers
	// (RFC 9110 6.5.1: framing, routing, authentication, request
	// modifiers, content format) or that name the client (X-Forwarded-For,
	// X-Real-IP, ...) were dropped, once per request.
	DroppedTrailer
	NumReasons
)

// Kinds of reasons, the "decision" of each.
const (
	KindDenied      = "denied"
	KindRewritten   = "rewritten"
	KindRejected    = "rejected"
	KindClientFault = "client_fault"
)

var reasonNames = [NumReasons]struct{ kind, name string }{
	Denied:             {KindDenied, "deny_list"},
	Reencoded:          {KindRewritten, "reencoded"},
	Normalized:         {KindRewritten, "normalized"},
	RejectControl:      {KindRejected, "control_character"},
	RejectNonASCII:     {KindRejected, "non_ascii"},
	RejectEscape:       {KindRejected, "bad_percent_encoding"},
	RejectNUL:          {KindRejected, "nul"},
	RejectSlash:        {KindRejected, "encoded_slash"},
	RejectParams:       {KindRejected, "path_parameter"},
	RejectLoop:         {KindRejected, "loop"},
	RejectTooLarge:     {KindRejected, "body_too_large"},
	FaultMalformedBody: {KindClientFault, "malformed_body"},
	FaultShortBody:     {KindClientFault, "short_body"},
	FaultBodyTimeout:   {KindClientFault, "body_timeout"},
	FaultSendTimeout:   {KindClientFault, "send_timeout"},
	FaultFraming:       {KindClientFault, "ambiguous_framing"},
	DroppedUnderscore:  {KindRewritten, "underscore_header"},
	DroppedTrailer:     {KindRewritten, "forbidden_trailer"},
}

// String is the reason's label value.
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r].name
	}
	return "unknown"
}

// Kind is the reason's decision: denied, rewritten, rejected or
// client_fault.
func (r Reason) Kind() string {
	if r < NumReasons {
		return reasonNames[r].kind
	}
	return "unknown"
}

// AllReasons lists every reason in order.
func AllReasons() []Reason {
	out := make([]Reason, NumReasons)
	for i := range out {
		out[i] = Reason(i)
	}
	return out
}

// Counters count edge decisions since start; they survive reloads. The
// request path adds with one atomic increment.
type Counters struct {
	reasons [NumReasons]atomic.Uint64
	// answers counts requests answered before a route was chosen (edge
	// refusals, loops, no route, redirects, ACME challenges) by status
	// class: 1xx..5xx at 1..5, anything else at 0.
	answers [6]atomic.Uint64
}

// Add counts one decision.
func (c *Counters) Add(r Reason) { c.reasons[r].Add(1) }

// Count returns the decisions of reason r since start.
func (c *Counters) Count(r Reason) uint64 { return c.reasons[r].Load() }

// Answered counts one request answered with status before any route was
// chosen.
func (c *Counters) Answered(status int) {
	k := status / 100
	if k < 1 || k > 5 {
		k = 0
	}
	c.answers[k].Add(1)
}

// Answers returns the requests answered before a route, by status class
// ("1xx".."5xx", "other").
func (c *Counters) Answers() map[string]uint64 {
	m := map[string]uint64{"other": c.answers[0].Load()}
	for k := 1; k <= 5; k++ {
		m[string(rune('0'+k))+"xx"] = c.answers[k].Load()
	}
	return m
}
