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

// ignored are annotations whose job sturdy does its own way, reported
// once as information ("" for none), and companions of translated ones
// (read by them).
var ignored = map[string]string{
	"proxy-send-timeout":        "sturdy bounds a request by connect, response_header and total timeouts; proxy-send-timeout has no counterpart and is ignored",
	"proxy-buffering":           "sturdy streams responses; proxy-buffering is ignored",
	"proxy-buffer-size":         "sturdy streams responses; proxy-buffer-size is ignored",
	"proxy-next-upstream":       "sturdy retries by its own attribution and budget; proxy-next-upstream is ignored",
	"proxy-next-upstream-tries": "sturdy retries by its own attribution and budget; proxy-next-upstream-tries is ignored",
	"session-cookie-max-age":    "",
	"session-cookie-expires":    "",
	"session-cookie-path":       "",
	"limit-burst-multiplier":    "",
	"enable-cors":               "enable-cors is not translated: sturdy does not answer CORS preflight requests itself; the application must, or set the headers with an HTTPRoute's ResponseHeaderModifier",
	"permanent-redirect-code":   "",
	"temporal-redirect-code":    "",
}

// annotation is one annotation's value to read.
type annotation struct {
	key, name, v string            // the full key, its name after the prefix, the trimmed value
	all          map[string]string // the Ingress's annotations, for companions
}

// readAnnotation reads a translated annotation into n. It returns why a
// value is not used ("is not true or false"; the annotation is then
// ignored, with an event), or "" when it is; a value that makes the
// Ingress unservable sets n.refuse instead.
type readAnnotation func(n *nginx, a annotation) string

// translated are the annotations sturdy translates, by name.
var translated = map[string]readAnnotation{
	"ssl-redirect":       boolean(func(n *nginx, b bool) { n.sslRedirect = b }),
	"force-ssl-redirect": boolean(func(n *nginx, b bool) { n.forceSSLRedirect = b }),
	"canary":             boolean(func(n *nginx, b bool) { n.canary = b }),
	"use-regex":          boolean(func(n *nginx, b bool) { n.regex = n.regex || b }),
	"proxy-body-size": func(n *nginx, a annotation) string {
		s, err := nginxSize(a.v)
		if err != nil {
			return "is not a size like 8m or 1g"
		}
		n.maxBody = s
		return ""
	},
	"proxy-connect-timeout":  seconds(func(n *nginx, d config.Duration) { n.connect = d }),
	"proxy-read-timeout":     seconds(func(n *nginx, d config.Duration) { n.read = d }),
	"limit-rps":              perTime(func(n *nginx, r int64) { n.rps = r }),
	"limit-rpm":              perTime(func(n *nginx, r int64) { n.rpm = r }),
	"whitelist-source-range": sourceRange,
	"allowlist-source-range": sourceRange,
	"auth-url": func(n *nginx, a annotation) string {
		u, err := url.Parse(a.v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return "is not an http or https URL"
		}
		n.authURL = a.v
		return ""
	},
	"auth-response-headers": func(n *nginx, a annotation) string {
		for _, h := range strings.Split(a.v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				n.authHeaders = append(n.authHeaders, h)
			}
		}
		return ""
	},
	"backend-protocol": func(n *nginx, a annotation) string {
		switch strings.ToUpper(a.v) {
		case "HTTP":
		case "HTTPS":
			n.upstreamTLS = true
		case "GRPC":
			n.upstreamProto = config.ProtocolH2C
		case "GRPCS":
			n.upstreamTLS, n.upstreamProto = true, config.ProtocolH2
		default:
			n.refuse = fmt.Sprintf("%s %s is not supported: sturdy speaks HTTP, HTTPS, GRPC (h2c) and GRPCS (HTTP/2 over TLS) to backends", a.key, a.v)
		}
		return ""
	},
	"affinity": func(n *nginx, a annotation) string {
		if a.v != "cookie" {
			return "is not cookie"
		}
		n.hashCookie = "INGRESSCOOKIE"
		return ""
	},
	"session-cookie-name": func(n *nginx, a annotation) string {
		if a.v != "" {
			n.hashCookie = a.v
		}
		return ""
	},
	"canary-weight":       weight(func(n *nginx, w int32) { n.canaryWeight = w }),
	"canary-weight-total": weight(func(n *nginx, w int32) { n.canaryTotal = w }),
	"rewrite-target": func(n *nginx, a annotation) string {
		switch {
		case !strings.HasPrefix(a.v, "/") && !strings.HasPrefix(a.v, "$"):
			n.refuse = fmt.Sprintf("%s %q is not a path: a rewrite to another host is a redirect (permanent-redirect)", a.key, a.v)
		case strings.ContainsAny(a.v, "?#"):
			n.refuse = fmt.Sprintf("%s %q holds a query: sturdy keeps the client's query and rewrites only the path", a.key, a.v)
		default:
			n.rewriteTarget, n.regex = a.v, true
		}
		return ""
	},
	"permanent-redirect": redirect(http.StatusMovedPermanently),
	"temporal-redirect":  redirect(http.StatusFound),
	"app-root": func(n *nginx, a annotation) string {
		if !strings.HasPrefix(a.v, "/") || strings.ContainsAny(a.v, "?#") {
			return "is not a path like /app"
		}
		n.appRoot = a.v
		return ""
	},
	"upstream-vhost": func(n *nginx, a annotation) string {
		if a.v == "" {
			return "is empty"
		}
		n.upstreamVhost = a.v
		return ""
	},
	"server-alias": func(n *nginx, a annotation) string {
		for _, h := range strings.Split(a.v, ",") {
			if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
				n.aliases = append(n.aliases, h)
			}
		}
		return ""
	},
	"custom-headers": func(n *nginx, a annotation) string {
		if a.v == "" || strings.Count(a.v, "/") > 1 {
			return "is not a ConfigMap's NAMESPACE/NAME"
		}
		n.customHeaders = a.v
		return ""
	},
	"x-forwarded-prefix": func(n *nginx, a annotation) string {
		if strings.ContainsAny(a.v, "\r\n\x00") {
			return "holds a line break"
		}
		n.forwardPrefix = a.v
		return ""
	},
	"canary-by-header": func(n *nginx, a annotation) string {
		if config.RuleHeaderProblem(a.v) != "" && !strings.EqualFold(a.v, "Host") {
			return "is not a header name"
		}
		n.canaryHeader = a.v
		return ""
	},
	"canary-by-header-value": func(n *nginx, a annotation) string {
		n.canaryHeaderValue = a.v
		return ""
	},
	"canary-by-header-pattern": func(n *nginx, a annotation) string {
		if _, err := regexp.Compile(a.v); err != nil {
			return "is not an RE2 regular expression"
		}
		n.canaryHeaderPattern = a.v
		return ""
	},
	"canary-by-cookie": func(n *nginx, a annotation) string {
		if a.v == "" || strings.ContainsAny(a.v, "=; \t") {
			return "is not a cookie name"
		}
		n.canaryCookie = a.v
		return ""
	},
}

func boolean(set func(*nginx, bool)) readAnnotation {
	return func(n *nginx, a annotation) string {
		b, err := strconv.ParseBool(a.v)
		if err != nil {
			return "is not true or false"
		}
		set(n, b)
		return ""
	}
}

func seconds(set func(*nginx, config.Duration)) readAnnotation {
	return func(n *nginx, a annotation) string {
		d, err := nginxSeconds(a.v)
		if err != nil {
			return "is not a number of seconds"
		}
		set(n, d)
		return ""
	}
}

// perTime reads a rate limit's count of requests.
func perTime(set func(*nginx, int64)) readAnnotation {
	return func(n *nginx, a annotation) string {
		r, err := strconv.ParseInt(a.v, 10, 64)
		if err != nil || r < 1 || r > 1_000_000 {
			return "is not a positive number of requests"
		}
		set(n, r)
		return ""
	}
}

func weight(set func(*nginx, int32)) readAnnotation {
	return func(n *nginx, a annotation) string {
		w, err := strconv.ParseInt(a.v, 10, 32)
		if err != nil || w < 0 {
			return "is not a non-negative number"
		}
		set(n, int32(w))
		return ""
	}
}

// sourceRange reads an allow list; one bad entry drops the whole list.
func sourceRange(n *nginx, a annotation) string {
	for _, c := range strings.Split(a.v, ",") {
		c = strings.TrimSpace(c)
		if _, err := config.ParsePrefix(c); err != nil {
			n.allow = nil
			return fmt.Sprintf("holds %q, which is not an address or CIDR", c)
		}
		n.allow = append(n.allow, c)
	}
	return ""
}

// redirect reads permanent-redirect or temporal-redirect, with its -code
// companion; temporal-redirect wins, as in ingress-nginx.
func redirect(def int) readAnnotation {
	return func(n *nginx, a annotation) string {
		if !strings.Contains(a.v, "://") && !strings.HasPrefix(a.v, "/") {
			return "is not a URL like https://example.com/new"
		}
		code, status := a.name+"-code", def
		if c := strings.TrimSpace(a.all[nginxPrefix+code]); c != "" {
			switch s, _ := strconv.Atoi(c); s {
			case 301, 302, 303, 307, 308:
				status = s
			default:
				n.events = append(n.events, fmt.Sprintf("%s%s: %q is not a redirect status (301, 302, 303, 307, 308); %d is used", nginxPrefix, code, c, status))
			}
		}
		if n.redirect != nil && a.name == "permanent-redirect" {
			return ""
		}
		// The URL is nginx's: its variables ($host, $request_uri) are sturdy's too.
		n.redirect = &config.Redirect{URL: a.v, Status: status}
		return ""
	}
}

// parseNginx reads the ingress-nginx annotations of an Ingress, in the
// order of their keys.
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
		a := annotation{key: k, name: strings.TrimPrefix(k, nginxPrefix), v: strings.TrimSpace(ann[k]), all: ann}
		if slices.Contains(snippets, a.name) {
			n.refuse = fmt.Sprintf("%s holds nginx configuration, which sturdy does not run; express it as sturdy config (docs/kubernetes.md) and remove the annotation", k)
			continue
		}
		if read, ok := translated[a.name]; ok {
			if why := read(n, a); why != "" {
				n.events = append(n.events, fmt.Sprintf("%s: %q %s; ignored", k, a.v, why))
			}
			continue
		}
		if why, ok := ignored[a.name]; ok {
			if why != "" {
				n.events = append(n.events, why)
			}
			continue
		}
		n.events = append(n.events, fmt.Sprintf("%s is not understood by sturdy and is ignored", k))
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
