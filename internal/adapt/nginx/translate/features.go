package translate

import (
	"fmt"
	"slices"
	"strings"
)

// Need names a sturdy feature whose absence keeps an nginx block from
// translating, or from answering as nginx did. Reasons say "needs <Need>",
// so that what each future config key would unlock can be counted.
type Need string

// The features nginx configs use that sturdy's config cannot express yet.
const (
	NeedRedirects       Need = "redirects"                 // return 301/302/..., rewrite ... redirect|permanent
	NeedFixedAnswers    Need = "fixed answers"             // return 204/403/404 [text], internal
	NeedStatic          Need = "static files"              // root, alias, index, try_files $uri
	NeedRewrites        Need = "path rewrites"             // rewrite ... break|last, proxy_pass with a URI part
	NeedRegexLocations  Need = "regex locations"           // location ~ and ~*
	NeedExactLocations  Need = "exact locations"           // location = next to a prefix location of the same path
	NeedRequestHeaders  Need = "request header rules"      // proxy_set_header other than the forwarding ones
	NeedHostHeader      Need = "Host header rules"         // nginx's default Host: $proxy_host, or a fixed Host
	NeedResponseHeaders Need = "response header rules"     // add_header, proxy_hide_header, expires
	NeedAccessRules     Need = "allow/deny per route"      // allow/deny in a location or server
	NeedBasicAuth       Need = "basic auth"                // auth_basic
	NeedAuthRequest     Need = "auth_request"              // auth_request
	NeedMethodRules     Need = "method rules"              // limit_except
	NeedUnixUpstreams   Need = "unix: upstreams"           // server unix:/path, proxy_pass http://unix:
	NeedVariables       Need = "proxy_pass with variables" // proxy_pass $x, proxy_pass http://$host
	NeedConditions      Need = "conditions"                // if, map
	NeedFastCGI         Need = "FastCGI/uWSGI/SCGI"        // fastcgi_pass, uwsgi_pass, scgi_pass
	NeedGRPC            Need = "grpc_pass"                 // grpc_pass
	NeedServerNames     Need = "regex and suffix server names"
	NeedErrorPages      Need = "error pages" // error_page, proxy_intercept_errors
	NeedLua             Need = "Lua"         // *_by_lua*
	NeedSNI             Need = "a certificate per server name"
	NeedProxyProtocol   Need = "PROXY protocol listeners"   // listen ... proxy_protocol
	NeedRateLimits      Need = "rate and connection limits" // limit_req, limit_conn, limit_rate
	NeedGzip            Need = "compression"                // gzip
	NeedTLSSettings     Need = "TLS settings"               // ssl_protocols, ssl_ciphers
	NeedResponseRewrite Need = "response rewriting"         // proxy_redirect, sub_filter, ssi, proxy_cookie_*
	NeedRequestRewrite  Need = "request rewriting"          // proxy_method, proxy_pass_request_headers/body
)

// Status is what became of an nginx block.
type Status string

// Block statuses.
const (
	// Translated: the routes answer as nginx did, as far as the import can tell.
	Translated Status = "translated"
	// TranslatedDiffers: translated, with the listed differences.
	TranslatedDiffers Status = "translated with differences"
	// Refused: nginx restricted access here in a way sturdy cannot reproduce;
	// a route answers with a refusal page (503, never the backend) instead.
	Refused Status = "refused"
	// NotTranslated: no route; its requests reach whatever route matches
	// them in sturdy (listed with the reason).
	NotTranslated Status = "not translated"
)

// Block is one nginx server block or location and what the import made of it.
type Block struct {
	File string `json:"file"`
	Line int    `json:"line"`
	// Server labels the server block ("server example.com", "default server (file:line)").
	Server string `json:"server"`
	// Location is "" for the server block itself, else the location as
	// written ("/api/", "= /x", "~ ^/a", "@app").
	Location string `json:"location,omitempty"`
	Status   Status `json:"status"`
	// Routes are the sturdy routes made from it.
	Routes []string `json:"routes,omitempty"`
	// Reasons say why it is not translated, or what differs.
	Reasons []string `json:"reasons,omitempty"`
	// Needs are the features that would make it translate, or answer as
	// nginx did.
	Needs []Need `json:"needs,omitempty"`
}

// Pos returns "file:line".
func (b *Block) Pos() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// String is one line for a report: where, what, status, reasons.
func (b *Block) String() string {
	what := b.Server
	if b.Location != "" {
		what += ", location " + b.Location
	}
	s := fmt.Sprintf("%s: %s: %s", b.Pos(), what, b.Status)
	if len(b.Reasons) > 0 {
		s += ": " + strings.Join(b.Reasons, "; ")
	}
	return s
}

// note is one reason with the feature that would remove it ("" when none would).
type note struct {
	reason string
	need   Need
}

// notes collects reasons without repeating one.
type notes []note

func (ns *notes) add(need Need, format string, args ...any) {
	n := note{reason: fmt.Sprintf(format, args...), need: need}
	if !slices.Contains(*ns, n) {
		*ns = append(*ns, n)
	}
}

// merge adds the notes of o that ns lacks.
func (ns *notes) merge(o notes) {
	for _, n := range o {
		if !slices.Contains(*ns, n) {
			*ns = append(*ns, n)
		}
	}
}

func (ns notes) reasons() []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.reason
		if n.need != "" {
			out[i] += " (needs " + string(n.need) + ")"
		}
	}
	return out
}

func (ns notes) needs() []Need {
	var out []Need
	for _, n := range ns {
		if n.need != "" && !slices.Contains(out, n.need) {
			out = append(out, n.need)
		}
	}
	return out
}
