package translate

import (
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
)

// The directives in effect at a proxied location, each mapped in one
// place. When sturdy's config grows a key for one of them (a header rule,
// a redirect, gzip), its entry here changes from a difference to an apply
// function, and nothing else has to.
//
// Directives that decide what answers a request (proxy_pass, return,
// try_files, rewrite, root, fastcgi_pass, ...) are looked at by content();
// access rules by protections(); proxy_set_header by requestHeaders().

// rule is what one directive, in effect at a proxied location, becomes.
type rule struct {
	// apply translates the directive onto the route; nil for the others.
	apply func(t *translator, c *locCtx, ds []*nginx.Directive)
	// need, with why, records a difference: nginx does this here, sturdy
	// does not (yet).
	need Need
	why  string
}

// harmless directives change nothing a client or backend can see that
// sturdy must reproduce: buffering, logging, files nginx keeps.
var harmless = rule{}

var locationRules = map[string]rule{
	"proxy_connect_timeout":       {apply: (*translator).timeouts},
	"proxy_read_timeout":          {apply: (*translator).timeouts},
	"client_max_body_size":        {apply: (*translator).bodySize},
	"proxy_next_upstream":         {apply: (*translator).retries},
	"proxy_next_upstream_tries":   {apply: (*translator).retries},
	"proxy_next_upstream_timeout": harmless,
	"error_page":                  {apply: (*translator).errorPages},
	"proxy_intercept_errors":      {apply: (*translator).intercept},
	"proxy_cache":                 {apply: (*translator).cache},
	"proxy_request_buffering":     {apply: (*translator).requestBuffering},

	"proxy_send_timeout": harmless, "send_timeout": harmless, "proxy_http_version": harmless,
	"proxy_buffering": harmless, "proxy_buffers": harmless,
	"proxy_buffer_size": harmless, "proxy_busy_buffers_size": harmless, "proxy_max_temp_file_size": harmless,
	"proxy_temp_file_write_size": harmless, "proxy_ignore_client_abort": harmless, "proxy_socket_keepalive": harmless,
	"proxy_headers_hash_max_size": harmless, "proxy_headers_hash_bucket_size": harmless, "proxy_force_ranges": harmless,
	"proxy_ssl_server_name": harmless, "proxy_ssl_name": harmless, "proxy_ssl_verify": harmless, "proxy_ssl_session_reuse": harmless,
	"proxy_ssl_protocols": harmless, "proxy_ssl_ciphers": harmless, "proxy_ssl_trusted_certificate": harmless,
	"client_body_buffer_size": harmless, "client_body_timeout": harmless, "client_body_temp_path": harmless,
	"client_header_timeout": harmless, "keepalive_timeout": harmless, "keepalive_requests": harmless,
	"access_log": harmless, "error_log": harmless, "log_not_found": harmless, "log_subrequest": harmless,
	"sendfile": harmless, "sendfile_max_chunk": harmless, "tcp_nodelay": harmless, "tcp_nopush": harmless,
	"aio": harmless, "directio": harmless, "output_buffers": harmless, "reset_timedout_connection": harmless,
	"lingering_close": harmless, "server_tokens": harmless, "chunked_transfer_encoding": harmless,
	"ignore_invalid_headers": harmless, "underscores_in_headers": harmless, "resolver": harmless, "resolver_timeout": harmless,
	"set": harmless, "break": harmless, "rewrite_log": harmless, "etag": harmless,
	"root": harmless, "alias": harmless, "index": harmless, "autoindex": harmless, "autoindex_exact_size": harmless,
	"autoindex_format": harmless, "autoindex_localtime": harmless, "default_type": harmless, "types": harmless,
	"charset": harmless, "charset_types": harmless, "open_file_cache": harmless, "open_file_cache_valid": harmless,
	"ssl_session_cache": harmless, "ssl_session_timeout": harmless, "ssl_session_tickets": harmless,
	"ssl_prefer_server_ciphers": harmless, "ssl_stapling": harmless, "ssl_stapling_verify": harmless,
	"ssl_buffer_size": harmless, "ssl_ecdh_curve": harmless, "ssl_early_data": harmless, "http2_push_preload": harmless,
	"satisfy": harmless, "auth_basic_user_file": harmless, "auth_request_set": harmless, "gzip_static": harmless,
	"server_name_in_redirect": harmless, "port_in_redirect": harmless, "absolute_redirect": harmless,
	"proxy_cache_valid": harmless, "proxy_cache_key": harmless, "proxy_cache_use_stale": harmless,
	"proxy_cache_lock": harmless, "proxy_cache_revalidate": harmless, "proxy_cache_min_uses": harmless,
	"proxy_cache_background_update": harmless, "proxy_cache_methods": harmless, "proxy_cache_bypass": harmless,
	"proxy_no_cache": harmless, "proxy_ignore_headers": harmless, "real_ip_header": harmless,
	"real_ip_recursive": harmless, "set_real_ip_from": harmless, "limit_rate_after": harmless,
	"limit_req_status": harmless, "limit_conn_status": harmless, "limit_req_log_level": harmless, "limit_conn_log_level": harmless,
	"limit_req_dry_run": harmless, "limit_conn_dry_run": harmless,

	"add_header":                 {apply: (*translator).addHeaders},
	"more_set_headers":           {need: NeedResponseHeaders, why: "nginx set response headers"},
	"more_clear_headers":         {need: NeedResponseHeaders, why: "nginx removed response headers"},
	"proxy_hide_header":          {apply: (*translator).hideHeaders},
	"proxy_pass_header":          {need: NeedResponseHeaders, why: "nginx passed headers it hides by default (Server, X-Accel-*)"},
	"expires":                    {apply: (*translator).expires},
	"proxy_redirect":             {apply: (*translator).proxyRedirect},
	"proxy_cookie_domain":        {need: NeedResponseRewrite, why: "nginx rewrote cookie domains"},
	"proxy_cookie_path":          {need: NeedResponseRewrite, why: "nginx rewrote cookie paths"},
	"sub_filter":                 {need: NeedResponseRewrite, why: "nginx rewrote response bodies"},
	"ssi":                        {apply: onOnly(NeedResponseRewrite, "nginx processed server-side includes")},
	"gzip":                       {apply: (*translator).gzip},
	"limit_req":                  {apply: (*translator).limitReq},
	"limit_conn":                 {apply: (*translator).limitConn},
	"limit_rate":                 {need: NeedRateLimits, why: "nginx limited the response rate"},
	"header_filter_by_lua_block": {need: NeedLua, why: "nginx ran Lua on the response headers"},
	"body_filter_by_lua_block":   {need: NeedLua, why: "nginx ran Lua on the response body"},
	"log_by_lua_block":           harmless,
}

// onOnly records a difference when the directive is on.
func onOnly(need Need, why string) func(t *translator, c *locCtx, ds []*nginx.Directive) {
	return func(t *translator, c *locCtx, ds []*nginx.Directive) {
		if d := last(ds); d != nil && d.Arg(0) == "on" {
			c.differs.add(need, "%s (%s)", why, d.Pos())
		}
	}
}

// settings applies every directive in effect at the content location sc:
// its own and those it inherits.
func (t *translator) settings(c *locCtx, sc *nginx.Scope) {
	seen := map[string]bool{}
	for s := sc; s != nil && s.Dir != nil && s.Dir.Name != "http"; s = s.Parent {
		for _, d := range s.Dir.Children {
			name := d.Name
			if seen[name] || d.IsBlock && name != "types" || structural[name] {
				continue
			}
			seen[name] = true
			ds := sc.Get(name)
			rl, known := locationRules[name]
			switch {
			case !known:
				for _, x := range ds {
					t.use(x)
				}
				if strings.HasPrefix(name, "gzip_") || strings.HasPrefix(name, "proxy_cache") || strings.HasPrefix(name, "ssl_") {
					continue // tuning of a feature noted by its main directive
				}
				c.differs.add("", "%s (%s) is not translated: %s", name, ds[0].Pos(), reason(ds[0]))
			case rl.apply != nil:
				for _, x := range ds {
					t.use(x)
				}
				rl.apply(t, c, ds)
			case rl.need != "":
				for _, x := range ds {
					t.use(x)
				}
				c.differs.add(rl.need, "%s (%s)", rl.why, ds[0].Pos())
			default:
				for _, x := range ds {
					t.use(x)
				}
			}
		}
	}
	// Directives the http block sets for every location.
	if t.site.HTTP != nil {
		for _, name := range []string{"gzip", "add_header", "limit_req", "limit_conn", "proxy_intercept_errors", "proxy_hide_header", "expires"} {
			if seen[name] {
				continue
			}
			if ds := sc.Get(name); len(ds) > 0 {
				seen[name] = true
				rl := locationRules[name]
				for _, x := range ds {
					t.use(x)
				}
				if rl.apply != nil {
					rl.apply(t, c, ds)
				} else {
					c.differs.add(rl.need, "%s (%s)", rl.why, ds[0].Pos())
				}
			}
		}
		for _, name := range []string{"proxy_connect_timeout", "proxy_read_timeout", "client_max_body_size", "proxy_next_upstream", "proxy_next_upstream_tries", "error_page", "proxy_cache", "proxy_redirect", "proxy_request_buffering"} {
			if !seen[name] {
				if ds := sc.Get(name); len(ds) > 0 {
					for _, x := range ds {
						t.use(x)
					}
					locationRules[name].apply(t, c, ds)
				} else if name == "client_max_body_size" {
					t.bodySize(c, nil)
				}
			}
		}
	}
}

// structural directives are read elsewhere: what answers (content), who
// may ask (protections), which headers go upstream (requestHeaders).
var structural = map[string]bool{
	"location": true, "if": true, "limit_except": true, "listen": true, "server_name": true,
	"proxy_pass": true, "return": true, "rewrite": true, "try_files": true, "internal": true,
	"allow": true, "deny": true, "auth_basic": true, "auth_request": true,
	"proxy_set_header": true, "proxy_pass_request_headers": true, "proxy_pass_request_body": true, "proxy_method": true,
	"ssl_certificate": true, "ssl_certificate_key": true, "ssl": true, "ssl_protocols": true, "ssl_ciphers": true,
	"ssl_dhparam": true, "ssl_trusted_certificate": true,
	"fastcgi_pass": true, "uwsgi_pass": true, "scgi_pass": true, "grpc_pass": true, "memcached_pass": true, "stub_status": true,
	"include": true, "access_by_lua_block": true, "rewrite_by_lua_block": true, "content_by_lua_block": true,
}

// proxyRedirect: nginx's default rewrites Location headers that name the
// upstream into the client-facing URL; off passes them on, as sturdy does.
func (t *translator) proxyRedirect(c *locCtx, ds []*nginx.Directive) {
	d := last(ds)
	if d == nil || d.Arg(0) == "off" {
		return
	}
	c.differs.add(NeedResponseRewrite, "nginx rewrote Location and Refresh headers that name the upstream (proxy_redirect %s, %s); sturdy passes them on", strings.Join(d.Args, " "), d.Pos())
}
