package translate

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// What nginx did to answers on their way out: compression and response
// headers.

// compressPlan is a route's compress block.
type compressPlan struct {
	types     []string // nil: sturdy's default list
	minLength int64
	level     int
	comment   string
}

// gzip turns gzip on into the route's compression, with nginx's gzip_*
// settings in effect there: nginx offered gzip only, at level 1, to
// responses of 20 bytes and more of text/html and gzip_types.
func (t *translator) gzip(c *locCtx, ds []*nginx.Directive) {
	d := last(ds)
	if d == nil || d.Arg(0) != "on" {
		return
	}
	sc := c.scope()
	cp := &compressPlan{minLength: 20, level: 1, comment: fmt.Sprintf("nginx gzip on (%s)", d.Pos())}
	types := []string{"text/html"}
	for _, x := range sc.Get("gzip_types") {
		t.use(x)
		for _, ty := range x.Args {
			switch {
			case ty == "*":
				types = nil
				cp.comment += "; gzip_types * compressed every type: sturdy compresses its default list of compressible types"
			case checkMediaType(ty):
				if types != nil && !slices.Contains(types, ty) {
					types = append(types, ty)
				}
			default:
				cp.comment += fmt.Sprintf("; gzip_types %s left out", ty)
			}
		}
	}
	cp.types = types
	if x := sc.Get1("gzip_min_length"); x != nil {
		t.use(x)
		if n, err := nginx.ParseSize(x.Arg(0)); err == nil && n >= 0 && n <= 1<<20 {
			cp.minLength = n
		}
	}
	if x := sc.Get1("gzip_comp_level"); x != nil {
		t.use(x)
		if n, err := strconv.Atoi(x.Arg(0)); err == nil && n >= 1 && n <= 9 {
			cp.level = n
		}
	}
	if x := sc.Get1("gzip_proxied"); c.pass != nil && (x == nil || x.Arg(0) == "off") {
		if x != nil {
			t.use(x)
		}
		c.differs.add(NeedGzip, "nginx did not compress answers to requests that came through another proxy (gzip_proxied off, its default: a Via header); sturdy compresses them too")
	} else if x != nil {
		t.use(x)
	}
	for _, name := range []string{"gzip_vary", "gzip_buffers", "gzip_http_version", "gzip_disable"} {
		for _, x := range sc.Get(name) {
			t.use(x)
		}
	}
	c.r.compress = cp
}

// checkMediaType accepts what sturdy's compress.types takes.
func checkMediaType(s string) bool {
	major, minor, ok := strings.Cut(s, "/")
	return ok && major != "" && minor != "" && major != "*" && !strings.ContainsAny(s, " ;,") &&
		(!strings.Contains(minor, "*") || minor == "*" || strings.HasPrefix(minor, "*+") && !strings.Contains(minor[1:], "*"))
}

// config returns the plan as sturdy's compress block.
func (cp *compressPlan) config() *config.Compress {
	return &config.Compress{Enabled: true, Encodings: []string{config.EncodingGzip}, Types: cp.types,
		MinLength: config.Size(cp.minLength), Level: config.CompressLevel{Gzip: cp.level}}
}

// addHeaders turns add_header into response rules (an added value, as
// nginx added one). Cache-Control on files is the static block's; HSTS is
// the TLS listener's (tls.go). nginx without always added headers only to
// 2xx and 3xx answers; sturdy adds them to every answer of the route.
func (t *translator) addHeaders(c *locCtx, ds []*nginx.Directive) {
	x := &varCtx{c: c, re: c.regex()}
	var never []string
	for _, d := range ds {
		name := strings.ToLower(d.Arg(0))
		switch {
		case name == "cache-control" && c.static != nil && slices.Contains(c.static.ccFrom, d):
		case name == "strict-transport-security" && c.sp.tls:
			c.hsts = d
		case !validFieldName(d.Arg(0)) || len(d.Args) < 2:
			c.differs.add(NeedResponseHeaders, "add_header %s (%s) is not a header name", d.Arg(0), d.Pos())
		case sturdyOwnsHeader(d.Arg(0)):
			c.differs.add(NeedResponseHeaders, "nginx added %s: %s (%s); sturdy sets that header itself", d.Arg(0), d.Arg(1), d.Pos())
		case slices.ContainsFunc(c.r.respAdd, func(h headerRule) bool { return strings.EqualFold(h.name, d.Arg(0)) }):
			c.differs.add(NeedResponseHeaders, "nginx added %s twice (%s); sturdy adds the first value only", d.Arg(0), d.Pos())
		default:
			tpl, why, ok := x.template(d.Arg(1))
			if !ok {
				c.differs.add(NeedResponseHeaders, "nginx added %s: %s (%s); %s", d.Arg(0), d.Arg(1), d.Pos(), why)
				continue
			}
			if x.requestID {
				c.differs.add(NeedResponseHeaders, "nginx added $request_id to the answer (%s); sturdy's request id goes back only in its own header", d.Pos())
				x.requestID = false
				continue
			}
			if tpl == "" {
				continue // nginx sends no header with an empty value
			}
			c.r.respAdd = append(c.r.respAdd, headerRule{d.Arg(0), tpl})
			if d.Arg(2) != "always" {
				never = append(never, d.Arg(0))
			}
		}
	}
	if len(never) > 0 {
		c.differs.add(NeedResponseHeaders, "nginx added %s to 2xx and 3xx answers only (add_header without always); sturdy adds them to errors too", strings.Join(never, ", "))
	}
}

// sturdyOwnsHeader reports the headers response rules cannot touch.
func sturdyOwnsHeader(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length", "Host", "Proxy-Connection", "Proxy-Authenticate":
		return true
	}
	return false
}

// hideHeaders turns proxy_hide_header into hide_response_headers.
func (t *translator) hideHeaders(c *locCtx, ds []*nginx.Directive) {
	for _, d := range ds {
		switch {
		case !validFieldName(d.Arg(0)) || sturdyOwnsHeader(d.Arg(0)):
			c.differs.add(NeedResponseHeaders, "proxy_hide_header %s (%s) is not a header sturdy can hide", d.Arg(0), d.Pos())
		case !slices.ContainsFunc(c.r.hide, func(h string) bool { return strings.EqualFold(h, d.Arg(0)) }):
			c.r.hide = append(c.r.hide, d.Arg(0))
		}
	}
}

// expires on a proxied location changed the backend's answers; on files
// the static block carries it.
func (t *translator) expires(c *locCtx, ds []*nginx.Directive) {
	d := last(ds)
	if d == nil || d.Arg(0) == "off" || c.static != nil && c.pass == nil {
		return
	}
	c.differs.add(NeedResponseHeaders, "nginx set Expires and Cache-Control on the backend's answers (expires %s, %s)", d.Arg(0), d.Pos())
}
