package kube

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// nginxPrefix is the prefix of ingress-nginx's annotations.
const nginxPrefix = "nginx.ingress.kubernetes.io/"

// nginx holds the ingress-nginx annotations of one Ingress that sturdy
// translates (docs/kubernetes.md lists them).
type nginx struct {
	sslRedirect      bool // default true: hosts with TLS redirect to HTTPS
	forceSSLRedirect bool
	maxBody          config.Size
	connect, read    config.Duration
	rps, rpm         int64
	allow            []string
	authURL          string
	authHeaders      []string
	upstreamTLS      bool
	upstreamProto    string // backend-protocol GRPC (h2c) or GRPCS (h2): the pool's protocol
	hashCookie       string
	canary           bool
	canaryWeight     int32
	canaryTotal      int32
	// canary-by-header (-value, -pattern) and canary-by-cookie.
	canaryHeader, canaryHeaderValue, canaryHeaderPattern, canaryCookie string
	// use-regex (implied by rewrite-target): ImplementationSpecific paths
	// are regular expressions.
	regex         bool
	rewriteTarget string
	// redirect is permanent-redirect or temporal-redirect: every path
	// answers with it.
	redirect      *config.Redirect
	appRoot       string
	upstreamVhost string
	forwardPrefix string   // x-forwarded-prefix
	customHeaders string   // custom-headers: the ConfigMap of response headers, NAMESPACE/NAME
	aliases       []string // server-alias: more hosts for each rule's host

	events []string // what was not understood or not translated
	refuse string   // why the whole Ingress is refused
}

// snippets hold raw nginx configuration, which sturdy does not run: an
// Ingress that carries one is refused rather than served without it (it
// is often an access rule or an auth check).
var snippets = []string{"server-snippet", "configuration-snippet", "stream-snippet", "auth-snippet", "modsecurity-snippet"}

// ignored are annotations whose job sturdy does its own way: they are
// reported once, as information, not translated.
var ignored = map[string]string{
	"proxy-send-timeout":        "sturdy bounds a request by connect, response_header and total timeouts; proxy-send-timeout has no counterpart and is ignored",
	"proxy-buffering":           "sturdy streams responses; proxy-buffering is ignored",
	"proxy-buffer-size":         "sturdy streams responses; proxy-buffer-size is ignored",
	"proxy-next-upstream":       "sturdy retries by its own attribution and budget; proxy-next-upstream is ignored",
	"proxy-next-upstream-tries": "sturdy retries by its own attribution and budget; proxy-next-upstream-tries is ignored",
	"session-cookie-name":       "",
	"session-cookie-max-age":    "",
	"session-cookie-expires":    "",
	"session-cookie-path":       "",
	"auth-response-headers":     "",
	"limit-burst-multiplier":    "",
	"canary":                    "",
	"canary-weight":             "",
	"canary-weight-total":       "",
	"enable-cors":               "enable-cors is not translated: sturdy does not answer CORS preflight requests itself; the application must, or set the headers with an HTTPRoute's ResponseHeaderModifier",
	"permanent-redirect-code":   "",
	"temporal-redirect-code":    "",
	"ssl-redirect":              "",
	"force-ssl-redirect":        "",
	"proxy-body-size":           "",
	"proxy-connect-timeout":     "",
	"proxy-read-timeout":        "",
	"limit-rps":                 "",
	"limit-rpm":                 "",
	"whitelist-source-range":    "",
	"allowlist-source-range":    "",
	"auth-url":                  "",
	"backend-protocol":          "",
	"affinity":                  "",
}

// parseNginx reads the ingress-nginx annotations of an Ingress.
func parseNginx(ann map[string]string) *nginx {
	n := &nginx{sslRedirect: true, canaryTotal: 100}
	keys := make([]string, 0, len(ann))
	for k := range ann {
		if strings.HasPrefix(k, nginxPrefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		name, v := strings.TrimPrefix(k, nginxPrefix), strings.TrimSpace(ann[k])
		bad := func(format string, args ...any) {
			n.events = append(n.events, fmt.Sprintf("%s: %q %s; ignored", k, v, fmt.Sprintf(format, args...)))
		}
		if slices.Contains(snippets, name) {
			n.refuse = fmt.Sprintf("%s holds nginx configuration, which sturdy does not run; express it as sturdy config (docs/kubernetes.md) and remove the annotation", k)
			continue
		}
		switch name {
		case "ssl-redirect", "force-ssl-redirect":
			b, err := strconv.ParseBool(v)
			if err != nil {
				bad("is not true or false")
				continue
			}
			if name == "ssl-redirect" {
				n.sslRedirect = b
			} else {
				n.forceSSLRedirect = b
			}
		case "proxy-body-size":
			s, err := nginxSize(v)
			if err != nil {
				bad("is not a size like 8m or 1g")
				continue
			}
			n.maxBody = s
		case "proxy-connect-timeout", "proxy-read-timeout":
			d, err := nginxSeconds(v)
			if err != nil {
				bad("is not a number of seconds")
				continue
			}
			if name == "proxy-connect-timeout" {
				n.connect = d
			} else {
				n.read = d
			}
		case "limit-rps", "limit-rpm":
			r, err := strconv.ParseInt(v, 10, 64)
			if err != nil || r < 1 || r > 1_000_000 {
				bad("is not a positive number of requests")
				continue
			}
			if name == "limit-rps" {
				n.rps = r
			} else {
				n.rpm = r
			}
		case "whitelist-source-range", "allowlist-source-range":
			for _, c := range strings.Split(v, ",") {
				c = strings.TrimSpace(c)
				if _, err := config.ParsePrefix(c); err != nil {
					bad("holds %q, which is not an address or CIDR", c)
					n.allow = nil
					break
				}
				n.allow = append(n.allow, c)
			}
		case "auth-url":
			u, err := url.Parse(v)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad("is not an http or https URL")
				continue
			}
			n.authURL = v
		case "auth-response-headers":
			for _, h := range strings.Split(v, ",") {
				if h = strings.TrimSpace(h); h != "" {
					n.authHeaders = append(n.authHeaders, h)
				}
			}
		case "backend-protocol":
			switch strings.ToUpper(v) {
			case "HTTP":
			case "HTTPS":
				n.upstreamTLS = true
			case "GRPC":
				n.upstreamProto = config.ProtocolH2C
			case "GRPCS":
				n.upstreamTLS, n.upstreamProto = true, config.ProtocolH2
			default:
				n.refuse = fmt.Sprintf("%s %s is not supported: sturdy speaks HTTP, HTTPS, GRPC (h2c) and GRPCS (HTTP/2 over TLS) to backends", k, v)
			}
		case "affinity":
			if v != "cookie" {
				bad("is not cookie")
				continue
			}
			n.hashCookie = "INGRESSCOOKIE"
		case "session-cookie-name":
			if v != "" {
				n.hashCookie = v
			}
		case "canary":
			b, err := strconv.ParseBool(v)
			if err != nil {
				bad("is not true or false")
				continue
			}
			n.canary = b
		case "canary-weight", "canary-weight-total":
			w, err := strconv.ParseInt(v, 10, 32)
			if err != nil || w < 0 {
				bad("is not a non-negative number")
				continue
			}
			if name == "canary-weight" {
				n.canaryWeight = int32(w)
			} else {
				n.canaryTotal = int32(w)
			}
		case "use-regex":
			b, err := strconv.ParseBool(v)
			if err != nil {
				bad("is not true or false")
				continue
			}
			n.regex = n.regex || b
		case "rewrite-target":
			switch {
			case !strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "$"):
				n.refuse = fmt.Sprintf("%s %q is not a path: a rewrite to another host is a redirect (permanent-redirect)", k, v)
			case strings.ContainsAny(v, "?#"):
				n.refuse = fmt.Sprintf("%s %q holds a query: sturdy keeps the client's query and rewrites only the path", k, v)
			default:
				n.rewriteTarget, n.regex = v, true
			}
		case "permanent-redirect", "temporal-redirect":
			if !strings.Contains(v, "://") && !strings.HasPrefix(v, "/") {
				bad("is not a URL like https://example.com/new")
				continue
			}
			code, status := name+"-code", http.StatusMovedPermanently
			if name == "temporal-redirect" {
				status = http.StatusFound
			}
			if c := strings.TrimSpace(ann[nginxPrefix+code]); c != "" {
				switch s, _ := strconv.Atoi(c); s {
				case 301, 302, 303, 307, 308:
					status = s
				default:
					n.events = append(n.events, fmt.Sprintf("%s%s: %q is not a redirect status (301, 302, 303, 307, 308); %d is used", nginxPrefix, code, c, status))
				}
			}
			if n.redirect != nil && name == "permanent-redirect" {
				continue // temporal-redirect wins, as in ingress-nginx
			}
			// The URL is nginx's: its variables ($host, $request_uri) are sturdy's too.
			n.redirect = &config.Redirect{URL: v, Status: status}
		case "app-root":
			if !strings.HasPrefix(v, "/") || strings.ContainsAny(v, "?#") {
				bad("is not a path like /app")
				continue
			}
			n.appRoot = v
		case "upstream-vhost":
			if v == "" {
				bad("is empty")
				continue
			}
			n.upstreamVhost = v
		case "server-alias":
			for _, h := range strings.Split(v, ",") {
				if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
					n.aliases = append(n.aliases, h)
				}
			}
		case "custom-headers":
			if v == "" || strings.Count(v, "/") > 1 {
				bad("is not a ConfigMap's NAMESPACE/NAME")
				continue
			}
			n.customHeaders = v
		case "x-forwarded-prefix":
			if strings.ContainsAny(v, "\r\n\x00") {
				bad("holds a line break")
				continue
			}
			n.forwardPrefix = v
		case "canary-by-header", "canary-by-header-value", "canary-by-header-pattern", "canary-by-cookie":
			switch {
			case name == "canary-by-cookie" && (v == "" || strings.ContainsAny(v, "=; \t")):
				bad("is not a cookie name")
				continue
			case name == "canary-by-header" && config.RuleHeaderProblem(v) != "" && !strings.EqualFold(v, "Host"):
				bad("is not a header name")
				continue
			case name == "canary-by-header-pattern":
				if _, err := regexp.Compile(v); err != nil {
					bad("is not an RE2 regular expression")
					continue
				}
			}
			switch name {
			case "canary-by-header":
				n.canaryHeader = v
			case "canary-by-header-value":
				n.canaryHeaderValue = v
			case "canary-by-header-pattern":
				n.canaryHeaderPattern = v
			default:
				n.canaryCookie = v
			}
		default:
			if why, ok := ignored[name]; ok {
				if why != "" {
					n.events = append(n.events, why)
				}
				continue
			}
			n.events = append(n.events, fmt.Sprintf("%s is not understood by sturdy and is ignored", k))
		}
	}
	if n.hashCookie != "" && ann[nginxPrefix+"affinity"] != "cookie" {
		n.hashCookie = ""
	}
	if n.hashCookie != "" {
		n.events = append(n.events, fmt.Sprintf("affinity: cookie hashes the %s cookie to choose a pod, and sturdy does not set that cookie: until the application sets it, a client is kept on one pod by its address", n.hashCookie))
	}
	if n.canaryWeight > n.canaryTotal {
		n.canaryWeight = n.canaryTotal
	}
	return n
}
