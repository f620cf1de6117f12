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

	// Filled when the format asks for them (fields, combined).
	RequestURI      string        // the request target as received, query included
	Query           string        // the raw query
	Proto           string        // HTTP/1.1, HTTP/2.0
	UserAgent       string        // User-Agent
	Referer         string        // Referer
	TLSVersion      string        // TLS 1.3, ...; "" for plain HTTP
	RequestID       string        // the request id (routes with request_id)
	RemoteUser      string        // the basic auth user
	UpstreamStatus  int           // the backend's status, when it differs from Status or there was one
	UpstreamConnect time.Duration // the last attempt's new connection; 0 when one was reused
	UpstreamHeader  time.Duration // the last attempt, to its response header
	UpstreamTotal   time.Duration // the last attempt, to the end of its body
	BytesIn         int64         // request body bytes read from the client

	// Format is what to write; nil means the default JSON fields.
	Format *Format
}

// Append appends r in its format (no newline) to b.
func (r *Record) Append(b []byte) []byte {
	if r.Format != nil && r.Format.combined {
		return r.AppendCombined(b)
	}
	return r.AppendJSON(b)
}

// AppendJSON appends r as one JSON object (no newline) to b: the fields of
// r.Format, or the default ones. Field names are the ones
// docs/observability.md lists. It is hand-written because the writer
// goroutine encodes every request and reflection would allocate several
// times per record.
func (r *Record) AppendJSON(b []byte) []byte {
	fields := defaultFields
	if r.Format != nil && len(r.Format.fields) > 0 {
		fields = r.Format.fields
	}
	b = append(b, '{')
	start := len(b)
	for _, f := range fields {
		b = r.appendJSONField(b, f)
	}
	if len(b) > start && b[start] == ',' {
		b = append(b[:start], b[start+1:]...) // the first field has no comma
	}
	return append(b, '}')
}

func (r *Record) appendJSONField(b []byte, f Field) []byte {
	switch f {
	case FieldTime:
		b = append(b, `,"time":"`...)
		b = r.Time.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
		return append(b, '"')
	case FieldClient:
		return appendField(b, "client", r.Client)
	case FieldMethod:
		return appendField(b, "method", r.Method)
	case FieldRequestHost:
		return appendField(b, "request_host", r.RequestHost)
	case FieldPath:
		return appendField(b, "path", r.Path)
	case FieldRoute:
		return appendField(b, "route", r.Route)
	case FieldPool:
		return appendField(b, "pool", r.Pool)
	case FieldHost:
		return appendField(b, "host", r.Host)
	case FieldAttempts:
		return appendInt(b, "attempts", int64(r.Attempts))
	case FieldOutcome:
		return appendField(b, "outcome", r.Outcome)
	case FieldAttribution:
		return appendField(b, "attribution", r.Attribution)
	case FieldAnswer:
		return appendField(b, "answer", r.Answer)
	case FieldCache:
		return appendField(b, "cache", r.Cache)
	case FieldStatus:
		return appendInt(b, "status", int64(r.Status))
	case FieldBytes:
		return appendInt(b, "bytes", r.Bytes)
	case FieldDuration:
		return appendMillis(b, "duration_ms", r.Duration)
	case FieldRequestURI:
		return appendField(b, "request_uri", r.RequestURI)
	case FieldQuery:
		return appendField(b, "query", r.Query)
	case FieldProto:
		return appendField(b, "protocol", r.Proto)
	case FieldUserAgent:
		return appendField(b, "user_agent", r.UserAgent)
	case FieldReferer:
		return appendField(b, "referer", r.Referer)
	case FieldTLSVersion:
		return appendField(b, "tls_version", r.TLSVersion)
	case FieldRequestID:
		return appendField(b, "request_id", r.RequestID)
	case FieldRemoteUser:
		return appendField(b, "remote_user", r.RemoteUser)
	case FieldUpstreamStatus:
		if r.UpstreamStatus == 0 {
			return b
		}
		return appendInt(b, "upstream_status", int64(r.UpstreamStatus))
	case FieldUpstreamConnect, FieldUpstreamHeader, FieldUpstreamTotal:
		if r.Attempts == 0 {
			return b // no upstream: nothing to time
		}
		switch f {
		case FieldUpstreamConnect:
			return appendMillis(b, "upstream_connect_ms", r.UpstreamConnect)
		case FieldUpstreamHeader:
			return appendMillis(b, "upstream_header_ms", r.UpstreamHeader)
		}
		return appendMillis(b, "upstream_total_ms", r.UpstreamTotal)
	case FieldBytesIn:
		return appendInt(b, "bytes_in", r.BytesIn)
	}
	return b
}

func appendInt(b []byte, key string, v int64) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, v, 10)
}

func appendMillis(b []byte, key string, d time.Duration) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return strconv.AppendFloat(b, float64(d.Microseconds())/1000, 'f', -1, 64)
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
