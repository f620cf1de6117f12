package cache

import (
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
)

// primaryKey is the store key of a request's target: route, scheme, host and
// request-target. The method is not part of it, so HEAD finds stored GETs.
func primaryKey(r *http.Request, route string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	var b strings.Builder
	uri := r.URL.RequestURI()
	b.Grow(len(route) + len(scheme) + len(r.Host) + len(uri) + 5)
	b.WriteString(route)
	b.WriteByte(0)
	b.WriteString(scheme)
	b.WriteString("://")
	b.WriteString(strings.ToLower(r.Host))
	b.WriteString(uri)
	return b.String()
}

// variantKey is the store key of one Vary variant under a marker.
func variantKey(primary string, gen uint64, values string) string {
	return primary + "\x00v" + strconv.FormatUint(gen, 10) + "\x00" + values
}

// varyNames parses the response's Vary into sorted canonical header names;
// star reports "Vary: *", which makes a response unusable for any other
// request (RFC 9111 4.1).
func varyNames(h http.Header) (names []string, star bool) {
	for _, line := range h["Vary"] {
		for _, f := range strings.Split(line, ",") {
			f = strings.TrimSpace(f)
			switch f {
			case "":
				continue
			case "*":
				return nil, true
			}
			names = append(names, textproto.CanonicalMIMEHeaderKey(f))
		}
	}
	slices.Sort(names)
	return slices.Compact(names), false
}

// varyValues normalises the request header values named by Vary into one
// comparable string: field lines are combined, whitespace around list
// separators is dropped, and headers whose values are case-insensitive are
// lower-cased (RFC 9111 4.1 allows such normalisation).
func varyValues(h http.Header, names []string) string {
	if len(names) == 0 {
		return ""
	}
	var b strings.Builder
	for i, name := range names {
		if i > 0 {
			b.WriteByte(0)
		}
		vv := h[name]
		if len(vv) == 0 {
			b.WriteByte(1) // absent differs from empty
			continue
		}
		fold := caseInsensitive(name)
		first := true
		for _, line := range vv {
			for _, part := range strings.Split(line, ",") {
				part = strings.TrimSpace(part)
				if !first {
					b.WriteByte(',')
				}
				first = false
				if fold {
					part = strings.ToLower(part)
				}
				b.WriteString(part)
			}
		}
	}
	return b.String()
}

func caseInsensitive(name string) bool {
	switch name {
	case "Accept-Encoding", "Accept-Charset", "Accept-Language":
		return true
	}
	return false
}
