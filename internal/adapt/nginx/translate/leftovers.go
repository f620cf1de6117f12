package translate

import (
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
)

// silent are directives with no behaviour sturdy needs to reproduce:
// process management, buffers, logging formats, MIME types. Their blocks
// are not looked into.
var silent = map[string]bool{
	"user": true, "worker_processes": true, "worker_rlimit_nofile": true, "worker_cpu_affinity": true,
	"worker_priority": true, "worker_shutdown_timeout": true, "pid": true, "daemon": true, "master_process": true,
	"events": true, "load_module": true, "env": true, "pcre_jit": true, "thread_pool": true, "timer_resolution": true,
	"error_log": true, "access_log": true, "log_format": true, "open_log_file_cache": true, "log_not_found": true,
	"log_subrequest": true, "rewrite_log": true,
	"http": true, "include": true, "types": true, "default_type": true, "types_hash_max_size": true, "types_hash_bucket_size": true,
	"charset": true, "charset_types": true, "source_charset": true,
	"sendfile": true, "sendfile_max_chunk": true, "tcp_nopush": true, "tcp_nodelay": true, "aio": true, "directio": true, "output_buffers": true,
	"server_names_hash_max_size": true, "server_names_hash_bucket_size": true, "variables_hash_max_size": true,
	"variables_hash_bucket_size": true, "map_hash_max_size": true, "map_hash_bucket_size": true,
	"server_tokens": true, "keepalive_requests": true, "keepalive_time": true, "reset_timedout_connection": true,
	"lingering_close": true, "lingering_time": true, "lingering_timeout": true, "client_body_buffer_size": true,
	"client_body_temp_path": true, "client_header_buffer_size": true, "large_client_header_buffers": true, "client_body_timeout": true,
	"proxy_buffering": true, "proxy_buffers": true, "proxy_buffer_size": true, "proxy_busy_buffers_size": true,
	"proxy_temp_path": true, "proxy_max_temp_file_size": true, "proxy_temp_file_write_size": true, "proxy_request_buffering": true,
	"proxy_http_version": true, "proxy_redirect": true, "proxy_intercept_errors": true, "proxy_ignore_client_abort": true,
	"proxy_headers_hash_max_size": true, "proxy_headers_hash_bucket_size": true, "proxy_socket_keepalive": true,
	"resolver": true, "resolver_timeout": true, "server_name_in_redirect": true, "port_in_redirect": true, "absolute_redirect": true,
	"ssl_session_cache": true, "ssl_session_timeout": true, "ssl_session_tickets": true, "ssl_buffer_size": true,
	"ssl_prefer_server_ciphers": true, "ssl_early_data": true, "http2": true, "http2_max_concurrent_streams": true,
	"server_name": true, "listen": true,
}

// standardHeaders are request headers sturdy sets itself, or passes on.
var standardHeaders = map[string]bool{
	"host": true, "x-real-ip": true, "x-forwarded-for": true, "x-forwarded-proto": true, "x-forwarded-host": true,
	"x-forwarded-port": true, "connection": true, "upgrade": true,
}

// reason explains why a directive has no translation.
func reason(d *nginx.Directive) string {
	n := d.Name
	switch {
	case d.Lua != "" || strings.Contains(n, "_by_lua") || strings.HasPrefix(n, "lua_"):
		return "Lua code is not translated"
	case n == "proxy_set_header":
		return "a request header outside the translated locations: sturdy sets headers per route (request_headers)"
	case n == "add_header" || n == "more_set_headers" || n == "more_clear_headers" || n == "proxy_hide_header" || n == "proxy_pass_header" || n == "expires":
		return "response headers are not changed by sturdy"
	case n == "allow" || n == "deny":
		return "access rules outside the translated locations"
	case n == "proxy_cache_path":
		return "nginx's disk cache: sturdy's cache is in memory, sized by cache.max_bytes"
	case strings.HasPrefix(n, "proxy_cache") || n == "proxy_no_cache":
		return "cache tuning: sturdy follows the origin's Cache-Control (RFC 9111) and keys on method, host and URL"
	case n == "error_page":
		return "error pages outside the translated locations: sturdy passes the backend's error answers through"
	case strings.HasPrefix(n, "fastcgi_") || strings.HasPrefix(n, "uwsgi_") || strings.HasPrefix(n, "scgi_"):
		return "sturdy proxies HTTP, serves files, redirects, rewrites and answers fixed bodies; it does not run FastCGI, uWSGI or SCGI"
	case strings.HasPrefix(n, "grpc_"):
		return "gRPC outside the translated locations: sturdy proxies gRPC to a pool with protocol h2c or h2"
	case n == "sub_filter":
		return "sturdy does not rewrite the bodies of answers"
	case n == "return" || n == "rewrite" || n == "try_files" || n == "root" || n == "alias" || n == "index" || n == "autoindex" || n == "stub_status" || n == "internal":
		return "outside the translated locations: sturdy proxies, serves files, redirects, rewrites and answers fixed bodies per route, and none took this"
	case n == "if" || n == "set" || n == "map" || n == "geo" || n == "split_clients":
		return "variables and conditions have no sturdy equivalent"
	case strings.HasPrefix(n, "ssl_") || n == "ssl":
		return "TLS settings: sturdy uses Go's TLS defaults (TLS 1.2 and 1.3, modern ciphers)"
	case n == "limit_req_zone" || n == "limit_conn_zone":
		return "no translated route uses this zone"
	case n == "limit_rate" || n == "limit_rate_after":
		return "sturdy does not limit the speed of answers"
	case strings.HasPrefix(n, "limit_req") || strings.HasPrefix(n, "limit_conn"):
		return "limits outside the translated locations"
	case strings.HasPrefix(n, "auth_") || n == "satisfy":
		return "authentication outside the translated locations"
	case strings.HasPrefix(n, "gzip"):
		return "compression settings outside the translated locations"
	case strings.HasPrefix(n, "brotli"):
		return "brotli (a third-party module): sturdy's compress.encodings can offer br"
	case strings.HasPrefix(n, "real_ip") || n == "set_real_ip_from":
		return "client address from headers: see trusted_proxies"
	case n == "upstream":
		return "no translated route uses this upstream"
	case n == "health_check":
		return "NGINX Plus health_check: translate it by hand into the pool's health.active"
	}
	return "no sturdy equivalent"
}

// leftovers lists every directive the translation did not use and that
// matters to behaviour.
func (t *translator) leftovers() {
	nginx.Walk(t.site.Config.Directives, func(d *nginx.Directive) bool {
		if t.used[d] {
			return d.Name == "location" || d.Name == "server" || d.Name == "http"
		}
		if silent[d.Name] {
			return d.Name == "http"
		}
		switch d.Name {
		case "server":
			return true
		case "proxy_set_header":
			if standardHeaders[strings.ToLower(d.Arg(0))] {
				return false
			}
		case "location":
			t.items = append(t.items, Item{File: d.File, Line: d.Line, Directive: d.String(), Reason: "not translated (no proxy_pass, static files, return or rewrite sturdy could take): its requests now fall to the nearest shorter route"})
			return false
		}
		t.items = append(t.items, Item{File: d.File, Line: d.Line, Directive: d.String(), Reason: reason(d)})
		return false
	})
}
