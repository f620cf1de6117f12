package accesslog

import (
	"fmt"
	"strconv"
	"strings"
)

// Field is one field of the JSON access log.
type Field uint8

// Fields, by their JSON names (docs/observability.md).
const (
	FieldTime Field = iota
	FieldClient
	FieldMethod
	FieldRequestHost
	FieldPath
	FieldRoute
	FieldPool
	FieldHost
	FieldAttempts
	FieldOutcome
	FieldAttribution
	FieldAnswer
	FieldCache
	FieldStatus
	FieldBytes
	FieldDuration
	FieldRequestURI
	FieldQuery
	FieldProto
	FieldUserAgent
	FieldReferer
	FieldTLSVersion
	FieldRequestID
	FieldRemoteUser
	FieldUpstreamStatus
	FieldUpstreamConnect
	FieldUpstreamHeader
	FieldUpstreamTotal
	FieldBytesIn
	numFields
)

var fieldNames = [numFields]string{
	"time", "client", "method", "request_host", "path", "route", "pool", "host",
	"attempts", "outcome", "attribution", "answer", "cache", "status", "bytes", "duration_ms",
	"request_uri", "query", "protocol", "user_agent", "referer", "tls_version", "request_id",
	"remote_user", "upstream_status", "upstream_connect_ms", "upstream_header_ms", "upstream_total_ms",
	"bytes_in",
}

func (f Field) String() string { return fieldNames[f] }

// defaultFields are the fields written when none are chosen: the access
// log's fields before they could be chosen, in the same order.
var defaultFields = []Field{
	FieldTime, FieldClient, FieldMethod, FieldRequestHost, FieldPath, FieldRoute, FieldPool, FieldHost,
	FieldAttempts, FieldOutcome, FieldAttribution, FieldAnswer, FieldCache, FieldStatus, FieldBytes, FieldDuration,
}

// DefaultFieldNames are the default fields' names, in order.
func DefaultFieldNames() []string {
	out := make([]string, len(defaultFields))
	for i, f := range defaultFields {
		out[i] = f.String()
	}
	return out
}

// Format is what the access log writes: JSON with chosen fields, or the
// combined format. It is compiled once per config and travels with each
// record, so that a reload changes it without reopening the log.
type Format struct {
	combined bool
	fields   []Field
	wants    uint64 // bit per Field
}

// ParseFormat compiles a format: "json" (or "") with fields (nil for the
// default ones), or "combined". The error names the field at fault.
func ParseFormat(format string, fields []string) (*Format, error) {
	f := &Format{}
	switch format {
	case "", "json":
	case "combined":
		f.combined = true
		// $remote_addr - $remote_user [$time_local] "$request" $status
		// $body_bytes_sent "$http_referer" "$http_user_agent"
		for _, x := range []Field{FieldClient, FieldRemoteUser, FieldTime, FieldMethod, FieldRequestURI, FieldProto, FieldStatus, FieldBytes, FieldReferer, FieldUserAgent} {
			f.wants |= 1 << x
		}
		return f, nil
	default:
		return nil, fmt.Errorf("format: unknown format %q; expected json or combined", format)
	}
	seen := map[Field]bool{}
	for i, name := range fields {
		x, ok := fieldByName(name)
		switch {
		case !ok:
			return nil, fmt.Errorf("fields[%d]: unknown field %q; expected one of: %s", i, name, strings.Join(fieldNames[:], ", "))
		case seen[x]:
			return nil, fmt.Errorf("fields[%d]: %q is listed twice", i, name)
		}
		seen[x] = true
		f.fields = append(f.fields, x)
	}
	list := f.fields
	if len(list) == 0 {
		list = defaultFields
	}
	for _, x := range list {
		f.wants |= 1 << x
	}
	return f, nil
}

func fieldByName(name string) (Field, bool) {
	for i, n := range fieldNames {
		if n == name {
			return Field(i), true
		}
	}
	return 0, false
}

// Wants reports whether the format writes field x; nil writes the
// default fields.
func (f *Format) Wants(x Field) bool {
	if f == nil {
		for _, d := range defaultFields {
			if d == x {
				return true
			}
		}
		return false
	}
	return f.wants&(1<<x) != 0
}

// WantsUpstreamTimes reports whether records need the attempts timed.
func (f *Format) WantsUpstreamTimes() bool {
	return f != nil && f.wants&(1<<FieldUpstreamConnect|1<<FieldUpstreamHeader|1<<FieldUpstreamTotal) != 0
}

// AppendCombined appends r in the combined format of nginx and Apache
// (no newline): $remote_addr - $remote_user [$time_local] "$request"
// $status $body_bytes_sent "$http_referer" "$http_user_agent". Strings are
// escaped as nginx escapes them: '"', '\' and bytes outside printable
// ASCII as \xHH; empty ones are "-".
func (r *Record) AppendCombined(b []byte) []byte {
	b = appendNginx(b, r.Client)
	b = append(b, " - "...)
	b = appendNginx(b, r.RemoteUser)
	b = append(b, " ["...)
	b = r.Time.AppendFormat(b, "02/Jan/2006:15:04:05 -0700")
	b = append(b, `] "`...)
	b = appendNginxRaw(b, r.Method)
	b = append(b, ' ')
	b = appendNginxRaw(b, r.RequestURI)
	b = append(b, ' ')
	b = appendNginxRaw(b, r.Proto)
	b = append(b, `" `...)
	b = strconv.AppendInt(b, int64(r.Status), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, r.Bytes, 10)
	b = append(b, ` "`...)
	b = appendNginx(b, r.Referer)
	b = append(b, `" "`...)
	b = appendNginx(b, r.UserAgent)
	return append(b, '"')
}

func appendNginx(b []byte, s string) []byte {
	if s == "" {
		return append(b, '-')
	}
	return appendNginxRaw(b, s)
}

// upperHex is how nginx writes escaped bytes in its log.
const upperHex = "0123456789ABCDEF"

func appendNginxRaw(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' || c == '\\' || c < 0x20 || c >= 0x7f {
			b = append(b, '\\', 'x', upperHex[c>>4], upperHex[c&0xf])
			continue
		}
		b = append(b, c)
	}
	return b
}
