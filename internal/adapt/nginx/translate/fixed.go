package translate

import (
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// return CODE ["text"] with a status that is not a redirect, and a
// location that is only `internal`, become a route's fixed answer
// (routes[].respond): every method gets nginx's status and body.

// fixedReturn reads a return that answers itself: its status, and its
// text when it has one. why is set when it answers itself in a way
// sturdy cannot repeat.
func fixedReturn(d *nginx.Directive) (code int, text string, hasText bool, why string) {
	if len(d.Args) < 1 || len(d.Args) > 2 {
		return 0, "", false, "not a fixed answer"
	}
	n, err := strconv.Atoi(d.Arg(0))
	if err != nil || n < 200 || n > 599 || n >= 300 && n < 400 {
		return 0, "", false, "not a fixed answer"
	}
	if len(d.Args) == 1 {
		return n, "", false, ""
	}
	text = d.Arg(1)
	if strings.Contains(text, "$") {
		return n, "", false, fmt.Sprintf("its text %q holds variables; sturdy's fixed answers are literal", text)
	}
	if n == 204 || n == 304 {
		return n, "", false, "" // nginx sends no body with these either
	}
	return n, text, true, ""
}

// errorPage is the page nginx sends for a return CODE without text (its
// built-in page, with server_tokens off: nginx's version is not known).
func errorPage(code int) string {
	if code < 400 {
		return ""
	}
	s := strconv.Itoa(code) + " " + http.StatusText(code)
	return "<html>\r\n<head><title>" + s + "</title></head>\r\n<body>\r\n<center><h1>" + s + "</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
}

// defaultType is the Content-Type nginx gives a return's text: the
// default_type in effect (nginx's own default text/plain).
func defaultType(sc *nginx.Scope) string {
	if d := sc.Get1("default_type"); d != nil {
		if _, _, err := mime.ParseMediaType(d.Arg(0)); err == nil {
			return d.Arg(0)
		}
	}
	return "text/plain"
}

// fixedRespond is the fixed answer of a return CODE ["text"] in scope:
// nginx's built-in page when it has no text, and for 444 no answer at all
// (respond.close: nginx closed the connection; Status stays 444 for the
// import's own reading of what keeps clients out, and is not written).
func fixedRespond(sc *nginx.Scope, code int, text string, hasText bool) *config.Respond {
	if code == 444 {
		return &config.Respond{Status: code, Close: true}
	}
	rs := &config.Respond{Status: code, Body: text, ContentType: defaultType(sc)}
	if !hasText {
		rs.Body = errorPage(code)
		if rs.Body != "" {
			rs.ContentType = "text/html"
		}
	}
	return rs
}

// fixedAnswer makes the location answer every request with code and
// body, where nginx answered itself.
func (t *translator) fixedAnswer(c *locCtx, l *nginx.Location, code int, body string, hasText bool, why string) {
	c.content = l
	rs := fixedRespond(l.Scope, code, body, hasText)
	c.r.respond = rs
	c.r.comments = append(c.r.comments, why)
	if st := l.Scope.Get1("server_tokens"); !hasText && rs.Body != "" && (st == nil || st.Arg(0) != "off") {
		c.differs.add("", "nginx's own %d page named its version unless server_tokens was off; sturdy's copy of it does not", code)
	}
}

// serverFixed makes c, the plan of a server whose own `return CODE
// ["text"]` answers every request before any location (a catch-all
// `server { listen 80 default_server; return 444; }`, Certbot's
// `return 404;`), one route with that fixed answer. Only where nothing
// else runs first at server level: an if or a rewrite there would pick
// some requests out before the return.
func (t *translator) serverFixed(c *locCtx, d *nginx.Directive) bool {
	srv := c.sp.srv
	if len(srv.Local("if")) > 0 || len(srv.Local("rewrite")) > 0 || last(srv.Local("return")) != d {
		return false
	}
	code, text, hasText, why := fixedReturn(d)
	if why != "" {
		return false
	}
	rs := fixedRespond(srv.Scope, code, text, hasText)
	if st := srv.Scope.Get1("server_tokens"); !hasText && rs.Body != "" && (st == nil || st.Arg(0) != "off") {
		c.sp.differs.add("", "nginx's own %d page named its version unless server_tokens was off; sturdy's copy of it does not", code)
	}
	c.r.respond = rs
	c.r.comments = []string{fmt.Sprintf("%s (%s): %s, before any location", c.sp.label, srv.Dir.Pos(), strings.TrimSuffix(d.String(), ";"))}
	return true
}
