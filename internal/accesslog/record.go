package accesslog

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// Record is one request as the proxy answered it. The proxy fills it at the
// end of the request; empty strings and zero numbers are left out of the
// line.
type Record struct {
	Time        time.Time     // when the request arrived
	Client      string        // client address (IP), as attributed
	Method      string        // request method
	RequestHost string        // the request's Host
	Path        string        // the request's path, without the query (which may hold secrets)
	Route       string        // route name
	Pool        string        // pool that served it
	Host        string        // backend host of the last attempt (host:port)
	Attempts    int           // upstream attempts made (0 when answered without one)
	Outcome     string        // outcome class of the last attempt (ok, connect_refused, ...)
	Attribution string        // whom a failure was attributed to: host, client, request, route
	Answer      string        // how it was answered: normal, panic, fallback, stale, sorry, shed
	Cache       string        // cache result: hit, miss, stale, bypass, revalidated
	Status      int           // status sent to the client
	Bytes       int64         // response body bytes sent to the client
	Duration    time.Duration // from arrival to the end of the answer
}

// AppendJSON appends r as one JSON object (no newline) to b. Field names
// are the ones docs/observability.md lists. It is hand-written because the
// writer goroutine encodes every request and reflection would allocate
// several times per record.
func (r *Record) AppendJSON(b []byte) []byte {
	b = append(b, `{"time":"`...)
	b = r.Time.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	b = append(b, '"')
	b = appendField(b, "client", r.Client)
	b = appendField(b, "method", r.Method)
	b = appendField(b, "request_host", r.RequestHost)
	b = appendField(b, "path", r.Path)
	b = appendField(b, "route", r.Route)
	b = appendField(b, "pool", r.Pool)
	b = appendField(b, "host", r.Host)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(r.Attempts), 10)
	b = appendField(b, "outcome", r.Outcome)
	b = appendField(b, "attribution", r.Attribution)
	b = appendField(b, "answer", r.Answer)
	b = appendField(b, "cache", r.Cache)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(r.Status), 10)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, r.Bytes, 10)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendFloat(b, float64(r.Duration.Microseconds())/1000, 'f', -1, 64)
	return append(b, '}')
}

func appendField(b []byte, key, val string) []byte {
	if val == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return appendString(b, val)
}

const hex = "0123456789abcdef"

// appendString appends s as a JSON string. Paths and Host headers come from
// clients and may hold any bytes (incident 003's raw non-ASCII URLs):
// invalid UTF-8 becomes U+FFFD so that every line stays valid JSON.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			// Valid JSON, but line terminators to JavaScript and some log shippers.
			b = append(b, `\u202`...)
			b = append(b, hex[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
