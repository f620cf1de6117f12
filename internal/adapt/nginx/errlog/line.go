// Package errlog reads nginx error logs as a stream, classifies the lines
// that matter to a proxy's health (no live upstreams, upstream timeouts,
// premature closes, refused connections, exhausted worker connections) and
// aggregates them into counts, a per-minute timeline and "pool empty"
// episodes with the clients, paths and backends of the upstream errors
// around each one. Memory stays bounded whatever the size of the log.
package errlog

import (
	"bytes"
	"strconv"
	"time"
)

// Kind classifies an error-log line.
type Kind int

// Kinds of lines, in report order.
const (
	Other          Kind = iota
	NoLive              // no live upstreams
	TimedOut            // upstream timed out
	PrematureClose      // upstream prematurely closed connection
	ConnectFailed       // connect() failed
	Reset               // recv()/readv()/writev() failed: reset by peer, broken pipe
	InvalidHeader       // upstream sent invalid header / no valid HTTP/1.0 header
	Disabled            // upstream server temporarily disabled
	Resolve             // could not be resolved
	WorkerConns         // worker_connections are not enough
	numKinds
)

var kindNames = [numKinds]string{
	Other:          "other",
	NoLive:         "no live upstreams",
	TimedOut:       "upstream timed out",
	PrematureClose: "upstream prematurely closed connection",
	ConnectFailed:  "connect() failed",
	Reset:          "connection reset or broken pipe",
	InvalidHeader:  "upstream sent invalid header",
	Disabled:       "upstream server temporarily disabled",
	Resolve:        "could not be resolved",
	WorkerConns:    "worker_connections are not enough",
}

func (k Kind) String() string {
	if k < 0 || k >= numKinds {
		return "unknown"
	}
	return kindNames[k]
}

// UpstreamError reports whether the kind is a failed attempt at a backend:
// the evidence nginx's passive health counts against a server.
func (k Kind) UpstreamError() bool {
	switch k {
	case TimedOut, PrematureClose, ConnectFailed, Reset, InvalidHeader, Disabled:
		return true
	}
	return false
}

// matchers classify a message by a substring, first match wins.
var matchers = []struct {
	sub  []byte
	kind Kind
}{
	{[]byte("no live upstreams"), NoLive},
	{[]byte("upstream server temporarily disabled"), Disabled},
	{[]byte("upstream timed out"), TimedOut},
	{[]byte("upstream prematurely closed connection"), PrematureClose},
	{[]byte("connect() failed"), ConnectFailed},
	{[]byte("connect() to "), ConnectFailed},
	{[]byte("worker_connections are not enough"), WorkerConns},
	{[]byte("could not be resolved"), Resolve},
	{[]byte("upstream sent invalid header"), InvalidHeader},
	{[]byte("upstream sent no valid HTTP/1.0 header"), InvalidHeader},
	{[]byte("Connection reset by peer"), Reset},
	{[]byte("Broken pipe"), Reset},
}

// Entry is one parsed error-log line. Byte-slice fields alias the line
// and are valid only until the next line is read.
type Entry struct {
	Time  time.Time
	Level []byte
	Kind  Kind
	// Conn is the connection number ("*5678"), 0 when absent.
	Conn int64
	// Msg is the message up to ", client:".
	Msg []byte
	// Connecting reports "while connecting to upstream": the request never
	// reached the backend.
	Connecting bool
	Client     []byte
	Server     []byte
	Request    []byte
	Upstream   []byte
	Host       []byte
}

// ParseLine parses one nginx error-log line (without its newline):
//
//	2024/03/05 08:11:02 [error] 1234#1234: *5678 upstream timed out (110: Connection timed out) while reading response header from upstream, client: 1.2.3.4, server: example.com, request: "GET /x HTTP/1.1", upstream: "http://10.0.0.1:8080/x", host: "example.com"
//
// It reports false for lines that do not start with an nginx timestamp
// (continuation lines, other programs' output).
func ParseLine(line []byte) (Entry, bool) {
	var e Entry
	if len(line) < 20 || line[4] != '/' || line[7] != '/' || line[10] != ' ' || line[13] != ':' || line[16] != ':' {
		return e, false
	}
	t, ok := parseTime(line[:19])
	if !ok {
		return e, false
	}
	e.Time = t
	rest := line[19:]
	rest = bytes.TrimLeft(rest, " ")
	if len(rest) > 0 && rest[0] == '[' {
		if i := bytes.IndexByte(rest, ']'); i > 0 {
			e.Level = rest[1:i]
			rest = rest[i+1:]
		}
	}
	rest = bytes.TrimLeft(rest, " ")
	// pid#tid:
	if i := bytes.Index(rest, []byte(": ")); i > 0 && i < 32 && bytes.IndexByte(rest[:i], '#') > 0 {
		rest = rest[i+2:]
	}
	if len(rest) > 1 && rest[0] == '*' {
		i := 1
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		e.Conn, _ = strconv.ParseInt(string(rest[1:i]), 10, 64)
		rest = bytes.TrimLeft(rest[i:], " ")
	}
	msg := rest
	if i := bytes.Index(rest, []byte(", client: ")); i >= 0 {
		msg = rest[:i]
		parseFields(rest[i+2:], &e)
	}
	e.Msg = msg
	e.Connecting = bytes.Contains(msg, []byte("while connecting to upstream"))
	for _, m := range matchers {
		if bytes.Contains(msg, m.sub) {
			e.Kind = m.kind
			break
		}
	}
	return e, true
}

// parseFields reads `client: 1.2.3.4, server: x, request: "GET / HTTP/1.1", ...`.
func parseFields(s []byte, e *Entry) {
	for len(s) > 0 {
		colon := bytes.Index(s, []byte(": "))
		if colon <= 0 {
			return
		}
		key := s[:colon]
		s = s[colon+2:]
		var val []byte
		if len(s) > 0 && s[0] == '"' {
			// nginx does not escape quotes inside these values; the value
			// ends at the quote that is followed by ", " or the line end.
			end := -1
			for i := 1; i < len(s); i++ {
				if s[i] == '"' && (i+1 == len(s) || bytes.HasPrefix(s[i+1:], []byte(", "))) {
					end = i
					break
				}
			}
			if end < 0 {
				val, s = s[1:], nil
			} else {
				val, s = s[1:end], s[end+1:]
			}
		} else if i := bytes.Index(s, []byte(", ")); i >= 0 {
			val, s = s[:i], s[i:]
		} else {
			val, s = s, nil
		}
		s = bytes.TrimPrefix(s, []byte(", "))
		switch string(key) {
		case "client":
			e.Client = val
		case "server":
			e.Server = val
		case "request":
			e.Request = val
		case "upstream":
			e.Upstream = val
		case "host":
			e.Host = val
		}
	}
}

func parseTime(b []byte) (time.Time, bool) {
	num := func(i, n int) int {
		v := 0
		for j := i; j < i+n; j++ {
			c := b[j]
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	y, mo, d := num(0, 4), num(5, 2), num(8, 2)
	h, mi, s := num(11, 2), num(14, 2), num(17, 2)
	if y < 0 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 || s < 0 || s > 60 {
		return time.Time{}, false
	}
	return time.Date(y, time.Month(mo), d, h, mi, s, 0, time.UTC), true
}

// UpstreamHost returns the host part of an upstream URL
// ("http://10.0.0.1:8080/x" -> "10.0.0.1:8080", "http://WEB/x" -> "WEB").
func UpstreamHost(u []byte) []byte {
	if i := bytes.Index(u, []byte("://")); i >= 0 {
		u = u[i+3:]
	}
	if i := bytes.IndexByte(u, '/'); i >= 0 {
		u = u[:i]
	}
	return u
}

// RequestRoute returns "METHOD /path" of a request line, without the query
// string and protocol: the key errors are grouped by.
func RequestRoute(req []byte) []byte {
	sp := bytes.IndexByte(req, ' ')
	if sp < 0 {
		return req
	}
	rest := req[sp+1:]
	end := len(rest)
	if i := bytes.LastIndexByte(rest, ' '); i >= 0 && bytes.HasPrefix(rest[i+1:], []byte("HTTP/")) {
		end = i
	}
	if i := bytes.IndexByte(rest[:end], '?'); i >= 0 {
		end = i
	}
	return req[:sp+1+end]
}

// NonASCII reports whether the request line holds raw bytes outside
// printable ASCII (nginx writes the request line to the error log as
// received) or \xNN escapes of such bytes (as in access logs).
func NonASCII(req []byte) bool {
	for i := 0; i < len(req); i++ {
		c := req[i]
		if c >= 0x80 || c < 0x20 || c == 0x7f {
			return true
		}
		if c == '\\' && i+3 < len(req) && req[i+1] == 'x' && hexVal(req[i+2]) >= 8 && hexVal(req[i+3]) >= 0 {
			return true
		}
	}
	return false
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
