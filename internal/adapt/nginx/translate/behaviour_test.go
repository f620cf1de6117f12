package translate

import (
	"slices"
	"strings"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// importCase translates an http-block body and returns the result, which
// must pass config.Parse apart from certificate files.
func importCase(t *testing.T, http string) *Result {
	t.Helper()
	cfg, err := nginx.Parse("t.conf", []byte("http {\n"+http+"\n}\n"), nginx.Options{FS: emptyFS{}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Translate(nginx.NewSite(cfg), Options{ConfigDir: "/nonexistent", Exists: func(string) bool { return false }})
	if err != nil {
		t.Fatalf("Translate: %v", err)
	}
	if _, err := config.Parse(res.YAML, "t.yaml"); err != nil && !onlyTLSErrors(err) {
		t.Fatalf("config.Parse: %v\n%s", err, res.YAML)
	}
	return res
}

func onlyTLSErrors(err error) bool {
	list, ok := err.(config.ErrorList)
	if !ok {
		return false
	}
	for _, e := range list {
		if !strings.Contains(e.Path, ".tls") {
			return false
		}
	}
	return true
}

// block returns the block at line of t.conf (0: the first server block).
func block(t *testing.T, res *Result, line int) Block {
	t.Helper()
	for _, b := range res.Blocks {
		if b.Line == line {
			return b
		}
	}
	t.Fatalf("no block at line %d; blocks: %+v", line, res.Blocks)
	return Block{}
}

func hasRoute(res *Result, substr string) bool { return strings.Contains(string(res.YAML), substr) }

func TestImportBehaviours(t *testing.T) {
	const up = "upstream app { server 10.0.0.1:8080; }\n"
	tests := []struct {
		name, http string
		line       int // the block to look at
		status     Status
		needs      []Need
		reason     string   // a substring of one of its reasons
		yaml       []string // substrings of the YAML
		notYAML    []string
	}{
		{
			name:   "an if with a quoted value right before ) parses",
			http:   up + "server {\nlisten 80;\nserver_name a.example;\nlocation / {\nif ($http_x = 'y') { return 403; }\nproxy_pass http://app;\n}\n}\nserver {\nlisten 81;\nlocation / { proxy_pass http://app; }\n}",
			line:   6,
			status: Refused, needs: []Need{NeedConditions},
			reason: "nginx answered 403 when ($http_x = y )",
		},
		{
			name:   "a host allow-list whose regex is not a finite list lets through only the server's names it matches, and closes the rest",
			http:   up + "server {\nlisten 80 default_server;\nserver_name a.example b.example;\nif ($host !~ \\.example$) { return 444; }\nlocation / { proxy_pass http://app; }\n}",
			line:   3,
			status: TranslatedDiffers, needs: []Need{NeedServerNames},
			reason: "lets through only the server's own names the regex matches",
			yaml:   []string{"respond: {close: true}", "hosts: [a.example, b.example]"},
		},
		{
			name:    "a method allow-list is every route's methods; an unanchored regex lets through only the methods it matches",
			http:    up + "server {\nlisten 80;\nif ($request_method !~ GET) { return 403; }\nlocation /a/ { proxy_pass http://app; }\nlocation / { proxy_pass http://app; }\n}",
			line:    3,
			status:  Translated,
			yaml:    []string{"methods: [GET] # nginx's server-level if $request_method !~", "methods_status: 403", "methods: [HEAD]"},
			notYAML: []string{"pool: refused"},
		},
		{
			name:   "a host allow-list in front of a server-wide redirect is kept: other hosts are closed, not redirected",
			http:   up + "server {\nlisten 80;\nserver_name a.example;\nif ($host !~ ^a\\.example$) { return 444; }\nreturn 301 https://$host$request_uri;\n}\nserver {\nlisten 443 ssl;\nserver_name a.example;\nlocation / { proxy_pass http://app; }\n}",
			line:   3,
			status: Translated,
			yaml:   []string{"respond: {close: true}", "redirect: {url: 'https://${host}${request_uri}'"},
		},
		{
			name:   "proxy_pass http://$map on $request_method without proxy_set_header Host: each method's route sends its upstream's name",
			http:   up + "upstream api { server 10.0.0.2:8080; }\nmap $request_method $w { POST api; default app; }\nserver {\nlisten 80;\nlocation / { proxy_pass http://$w; }\n}",
			line:   7,
			status: Translated,
			yaml:   []string{"methods: [POST]\n    pool: api", "host_header: api", "host_header: app"},
		},
		{
			name:   "a TLS server without a certificate keeps its listener and routes",
			http:   up + "server {\nlisten 443 ssl;\nserver_name a.example;\nlocation / { proxy_set_header Host $host; proxy_pass http://app; }\n}",
			line:   6,
			status: Translated,
			yaml:   []string{"name: https", "cert: /nonexistent/sturdy-tls-443.crt", "listeners: [https]"},
		},
		{
			name:   "ssl on makes the listener TLS",
			http:   up + "server {\nlisten 443;\nssl on;\nssl_certificate c.pem;\nssl_certificate_key k.pem;\nserver_name a.example;\nlocation / { proxy_pass http://app; }\n}",
			line:   9,
			status: Translated,
			yaml:   []string{"name: https", "cert: /nonexistent/c.pem"},
		},
		{
			name:   "server_name name.* is listed, not dropped",
			http:   up + "server {\nlisten 80;\nserver_name a.example;\nlocation / { proxy_pass http://app; }\n}\nserver {\nlisten 80;\nserver_name www.example.*;\nlocation / { proxy_pass http://app; }\n}",
			line:   8,
			status: NotTranslated, needs: []Need{NeedServerNames},
			reason: `server name "www.example.*"`,
		},
		{
			name:   "unix: upstreams and proxy_pass to a socket become socket hosts",
			http:   "upstream app { server unix:///run/app.sock; }\nserver {\nlisten 80;\nlocation / { proxy_pass http://app; }\nlocation /x/ { proxy_pass http://unix:/run/x.sock; }\n}",
			line:   6,
			status: Translated,
			yaml:   []string{"- {addr: 'unix:/run/app.sock'}", "- {addr: 'unix:/run/x.sock'}", "host_header: $proxy_host"},
		},
		{
			name:   "listen proxy_protocol keeps the listener and lists the difference",
			http:   up + "server {\nlisten 8080 proxy_protocol http2;\nlocation / { proxy_set_header Host $host; proxy_pass http://app; }\n}",
			line:   3,
			status: TranslatedDiffers, needs: []Need{NeedProxyProtocol},
			reason: "set proxy_protocol: required",
			yaml:   []string{"listen: :8080", "once trusted_proxies lists the load balancers", "h2c: true"},
		},
		{
			name:    "listen http2 without ssl is an h2c listener; with ssl, tls offers h2 already",
			http:    up + "server {\nlisten 80 http2;\nlocation / { proxy_pass http://app; }\n}\nserver {\nlisten 443 ssl http2;\nssl_certificate c.pem;\nssl_certificate_key k.pem;\nlocation / { proxy_pass http://app; }\n}",
			line:    3,
			status:  Translated,
			yaml:    []string{"listen: :80\n    h2c: true"},
			notYAML: []string{"listen: :443\n    h2c"},
		},
		{
			name:   "rewrite ... break with a query sets it, the client's appended as nginx",
			http:   up + "server {\nlisten 80;\nlocation /u/ { rewrite ^/u/(\\d+)$ /users?id=$1 break; proxy_pass http://app; }\nlocation /v/ { rewrite ^/v/(\\d+)$ /v?id=$1? break; proxy_pass http://app; }\n}",
			line:   5,
			status: Translated,
			yaml:   []string{`rewrite: {regex: ^/u/(\d+)$, path: /users, query: 'id=${1}&${args}'}`, "a trailing & here"},
		},
		{
			name:   "rewrite ... break with a query and a trailing ? sets only that query",
			http:   up + "server {\nlisten 80;\nlocation /v/ { rewrite ^/v/(\\d+)$ /v?id=$1? break; proxy_pass http://app; }\n}",
			line:   5,
			status: Translated,
			yaml:   []string{`rewrite: {regex: ^/v/(\d+)$, path: /v, query: 'id=${1}'}`},
		},
		{
			name:    "encoded slashes pass where nginx forwarded the URI as sent (proxy_pass without a URI part), not where it rewrote it",
			http:    up + "server {\nlisten 80;\nlocation /api/ { proxy_pass http://app/v1/; }\nlocation / { proxy_pass http://app; }\n}",
			line:    5,
			status:  Translated,
			yaml:    []string{"path: /\n    default: true\n    pool: app\n    timeouts:\n      connect: 5s\n      response_header: 30s\n    max_body_bytes: 1MiB # nginx's default client_max_body_size\n    upgrades: [] # nginx sent no Upgrade header here (proxy_set_header Upgrade $http_upgrade), so it never switched to WebSocket\n    allow_encoded_slashes: true # nginx forwarded %2F as sent"},
			notYAML: []string{"rewrite: {prefix: /v1/}\n    allow_encoded_slashes", "allow_encoded_slashes: true # nginx forwarded %2F as sent here (proxy_pass without a URI part)\n    # the path"},
		},
		{
			name:   "proxy_pass with a URI part is a path rewrite",
			http:   up + "server {\nlisten 80;\nlocation /api/ { proxy_pass http://app/; }\nlocation = /x { proxy_pass http://app/y; }\nlocation / { proxy_pass http://app; }\n}",
			line:   5,
			status: Translated,
			yaml:   []string{"match:\n      path: {starts_with: /api/}", "rewrite: {prefix: /}", "match:\n      path: {exact: /x}", "rewrite: {path: /y}"},
		},
		{
			name:   "proxy_pass with variables in the URI is a path template, the dropped query listed",
			http:   up + "server {\nlisten 80;\nlocation ~ ^/u/(.*)$ { proxy_pass http://app/users/$1; }\nlocation /k/ { proxy_pass http://app$request_uri; }\nlocation /m/ { proxy_pass http://app/m$uri$is_args$args; }\n}",
			line:   5,
			status: TranslatedDiffers, needs: []Need{NeedRewrites},
			reason: "without the client's query",
			yaml:   []string{"regex: ^/u/(.*)$", "rewrite: {path: '/users/${1}'}", "rewrite: {path: '/m${uri}'}"},
		},
		{
			name:   "rewrite ... break before proxy_pass is the route's rewrite",
			http:   up + "server {\nlisten 80;\nlocation /static/ { rewrite ^/static/(.*)$ /$1 break; proxy_pass http://app; }\nlocation /two/ { rewrite ^/two/a /a; rewrite ^/two/b /b last; proxy_pass http://app; }\n}",
			line:   5,
			status: Translated,
			yaml:   []string{"rewrite: {regex: ^/static/(.*)$, path: '/${1}'}"},
		},
		{
			name:   "more than one path rewrite is listed",
			http:   up + "server {\nlisten 80;\nlocation /two/ { rewrite ^/two/a /a; rewrite ^/two/b /b last; proxy_pass http://app; }\n}",
			line:   5,
			status: NotTranslated, needs: []Need{NeedRewrites},
			reason: "2 rewrites in turn",
		},
		{
			name:   "proxy_pass with a variable sturdy cannot resolve refuses its paths, so they reach no other route",
			http:   up + "server {\nlisten 80;\nlocation /v/ { proxy_pass http://$host; }\nlocation / { proxy_pass http://app; }\n}",
			line:   5,
			status: NotTranslated, needs: []Need{NeedVariables},
			reason: "$host names the backend by the request's host",
			yaml:   []string{"name: default-v-held\n    listeners: [http]\n    path: /v/\n    pool: refused"},
		},
		{
			name:   "proxy_pass http://$map without proxy_set_header Host sends each upstream's name, as nginx's $proxy_host",
			http:   up + "upstream api { server 10.0.0.2:8080; }\nmap $http_x_side $side { api api; default app; }\nserver {\nlisten 80;\nlocation / { proxy_pass http://$side; }\n}",
			line:   7,
			status: Translated,
			yaml:   []string{"- {pool: api, header: {name: X-Side, regex: '^(?i:api)$'}, host_header: api}", "- {pool: app, weight: 1, host_header: app}"},
		},
		{
			name:   "proxy_pass http://$var with a set naming an upstream is that upstream; a set in an if is refused",
			http:   up + "upstream api { server 10.0.0.2:8080; }\nserver {\nlisten 80;\nset $up api;\nlocation /s/ { proxy_pass http://$up; }\nlocation /i/ { if ($http_x) { set $up app; } proxy_pass http://$up; }\nlocation / { proxy_pass http://app; }\n}",
			line:   8,
			status: NotTranslated, needs: []Need{NeedVariables},
			reason: "$up is set when if ($http_x)",
			yaml:   []string{"path: /s/\n    pool: api", "path: /i/\n    pool: refused"},
		},
		{
			name:   "the default server of the TLS listener answers unknown hosts there",
			http:   up + "server {\nlisten 80;\nserver_name a.example;\nlocation / { proxy_pass http://app; }\n}\nserver {\nlisten 443 ssl;\nssl_certificate c.pem;\nssl_certificate_key k.pem;\nserver_name a.example;\nlocation / { proxy_pass http://app; }\n}",
			line:   13,
			status: Translated,
			yaml:   []string{"name: a.example\n    listeners: [http]\n    path: /\n    default: true", "name: a.example-2\n    listeners: [https]\n    path: /"},
		},
		{
			name:   "an ingress-nginx Lua balancer is not a pool at 0.0.0.1",
			http:   "upstream upstream_balancer { server 0.0.0.1; balancer_by_lua_block { balancer.balance() } keepalive 320; }\n" + up + "server {\nlisten 80;\nlocation /lua/ { proxy_pass http://upstream_balancer; }\nlocation / { proxy_pass http://app; }\n}",
			line:   6,
			status: NotTranslated, needs: []Need{NeedLua},
			reason:  "chooses its servers in Lua",
			notYAML: []string{"addr: '0.0.0.1"},
		},
		{
			name:   "nginx's default Host: $proxy_host is the upstream's name, or the address",
			http:   up + "server {\nlisten 80;\nlocation / { proxy_pass http://app; }\nlocation /d/ { proxy_pass http://10.0.0.2:8080; }\n}",
			line:   5,
			status: Translated,
			yaml:   []string{"host_header: app", "host_header: $proxy_host"},
		},
		{
			name:    "proxy_set_header Host $proxy_host sends the upstream's name, as nginx; to an address, the address",
			http:    up + "server {\nlisten 80;\nlocation / { proxy_set_header Host $proxy_host; proxy_pass http://app; }\nlocation /d/ { proxy_set_header Host $proxy_host; proxy_pass http://10.0.0.2:8080; }\n}",
			line:    5,
			status:  Translated,
			yaml:    []string{"host_header: app", "host_header: ${proxy_host}"},
			notYAML: []string{"'${proxy_host}'\n    pool: app"},
		},
		{
			name:   "Host $host:$server_port keeps the port of a server on one port",
			http:   up + "server {\nlisten 8448;\nlocation / { proxy_set_header Host $host:$server_port; proxy_pass http://app; }\n}",
			line:   5,
			status: Translated,
			yaml:   []string{"host_header: ${host}:8448"},
		},
		{
			name:   "Host $host:$server_port on a server of two ports sends the listener's port",
			http:   up + "server {\nlisten 80;\nlisten 8080;\nlocation / { proxy_set_header Host $host:$server_port; proxy_set_header X-Port $server_port; proxy_pass http://app; }\n}",
			line:   6,
			status: Translated,
			yaml:   []string{"host_header: ${host}:${server_port}", "X-Port: ${server_port}"},
		},
		{
			name:   "proxy_set_header becomes request rules and Host; $request_id a fresh id",
			http:   up + "server {\nlisten 80;\nserver_name a.example;\nlocation / { proxy_set_header Host $host; proxy_set_header X-Original-URI $request_uri; proxy_set_header X-Debug \"\"; proxy_set_header X-Name $server_name; proxy_set_header X-Request-ID $request_id; proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; proxy_set_header X-Who $cookie_who; proxy_set_header X-Client-Dn $ssl_client_s_dn; proxy_pass http://app; }\n}",
			line:   6,
			status: TranslatedDiffers, needs: []Need{NeedRequestHeaders},
			reason:  "sturdy has no value for $ssl_client_s_dn, so sturdy removes the client's X-Client-Dn",
			yaml:    []string{"host_header: ${host}", "X-Original-Uri: ${request_uri}", "X-Name: a.example", "X-Who: ${cookie_who}", "remove: [X-Debug, X-Client-Dn]", "request_id: {header: X-Request-Id, accept: none, response: false}"},
			notYAML: []string{"X-Forwarded-For:", "        X-Client-Dn:"},
		},
		{
			name:   "add_header and proxy_hide_header become response rules",
			http:   up + "server {\nlisten 80;\nlocation / { add_header X-Frame-Options DENY always; add_header X-Up $upstream_addr; proxy_hide_header X-Powered-By; proxy_pass http://app; }\n}",
			line:   5,
			status: TranslatedDiffers, needs: []Need{NeedResponseHeaders},
			reason: "sturdy has no value for $upstream_addr",
			yaml:   []string{"response_headers:\n      add:\n        X-Frame-Options: DENY", "hide_response_headers: [X-Powered-By]"},
		},
		{
			name:   "auth_basic becomes basic_auth on the route",
			http:   up + "server {\nlisten 80;\nlocation / { proxy_pass http://app; }\nlocation /admin/ { auth_basic \"x\"; auth_basic_user_file /h; proxy_pass http://app; }\n}",
			line:   6,
			status: TranslatedDiffers,
			yaml:   []string{"path: /admin/\n    pool: app", "basic_auth:\n      realm: x\n      htpasswd: /h"},
		},
		{
			name:   "an allow list at server level guards every location",
			http:   up + "server {\nlisten 80;\nallow 10.0.0.0/8;\ndeny all;\nlocation / { proxy_pass http://app; }\n}\nserver {\nlisten 81;\nlocation / { proxy_pass http://app; }\n}",
			line:   7,
			status: Translated,
			yaml:   []string{"access:\n      - {allow: 10.0.0.0/8}\n      - {deny: all}"},
		},
		{
			name:   "auth_request becomes forward_auth to the pool its location proxies to",
			http:   up + "upstream oauth { server 10.0.0.9:4180; }\nserver {\nlisten 80;\nlocation / { auth_request /auth; auth_request_set $u $upstream_http_x_user; proxy_set_header X-User $u; proxy_pass http://app; }\nlocation = /auth { internal; proxy_pass http://oauth/validate; }\n}",
			line:   6,
			status: TranslatedDiffers,
			yaml:   []string{"forward_auth:\n      url: http://oauth/validate\n      pool: oauth\n      copy_headers: [X-User]", "path: {exact: /auth}"},
		},
		{
			name:   "satisfy any with an allow list and a password is kept as both",
			http:   up + "server {\nlisten 80;\nlocation / { satisfy any; allow 10.0.0.0/8; deny all; auth_basic x; auth_basic_user_file /h; proxy_pass http://app; }\n}",
			line:   5,
			status: TranslatedDiffers, needs: []Need{NeedAccessRules},
			reason: "sturdy requires both",
			yaml:   []string{"access:", "basic_auth:"},
		},
		{
			name:   "limit_except GET { deny all; } becomes methods",
			http:   up + "server {\nlisten 80;\nlocation / { limit_except GET { deny all; } proxy_pass http://app; }\n}",
			line:   5,
			status: Translated,
			yaml:   []string{"methods: [GET]"},
		},
		{
			name:   "limit_req and limit_conn become zones and route limits with nginx's 503",
			http:   up + "limit_req_zone $binary_remote_addr zone=perip:10m rate=5r/s;\nlimit_conn_zone $binary_remote_addr zone=conns:1m;\nserver {\nlisten 80;\nlocation / { limit_req zone=perip burst=10 nodelay; limit_conn conns 4; proxy_pass http://app; }\n}",
			line:   7,
			status: Translated,
			yaml:   []string{"rate_limit_zones:\n  - {name: perip, key: client_ip, rate: 5r/s, size: 163840}", "conn_limit_zones:\n  - {name: conns, key: client_ip, size: 16384}", "rate_limit:\n      - {zone: perip, burst: 10, nodelay: true, status: 503}", "conn_limit:\n      - {zone: conns, max: 4, status: 503}"},
		},
		{
			name:   "an if that refuses is a condition sturdy cannot keep: refused",
			http:   up + "server {\nlisten 80;\nlocation / { if ($http_x) { return 403; } proxy_pass http://app; }\n}\nserver {\nlisten 81;\nlocation / { proxy_pass http://app; }\n}",
			line:   5,
			status: Refused, needs: []Need{NeedConditions},
			yaml: []string{"pool: refused"},
		},
		{
			name:   "a protected regex location keeps its rules on its regex route",
			http:   up + "server {\nlisten 80;\nlocation / { proxy_pass http://app; }\nlocation ~ /\\.git { deny all; }\n}\nserver {\nlisten 81;\nlocation / { proxy_pass http://app; }\n}",
			line:   6,
			status: Translated,
			yaml:   []string{"path: {regex: /\\.git}", "access:\n      - {deny: all}"},
		},
		{
			name:   "a protected regex location sturdy cannot route refuses its whole server",
			http:   up + "server {\nlisten 80;\nlocation / { proxy_pass http://app; }\nlocation ~ ^/(x)\\1 { deny all; }\n}\nserver {\nlisten 81;\nlocation / { proxy_pass http://app; }\n}",
			line:   6,
			status: Refused,
			reason: "sturdy cannot route it, so every route of this server refuses",
		},
		{
			name:   "a protected regex with look-around keeps clients out of a superset of its paths",
			http:   up + "server {\nlisten 80;\nlocation / { proxy_pass http://app; }\nlocation ~ /\\.(?!well-known) { deny all; }\nlocation ~ ^/(?!api) { proxy_pass http://app; }\n}",
			line:   6,
			status: TranslatedDiffers, needs: []Need{NeedRegexLocations},
			reason:  "more than nginx did",
			yaml:    []string{"path: {regex: /\\.}\n    max_body_bytes: 1MiB", "- {deny: all}"},
			notYAML: []string{"path: {regex: ^/}"},
		},
		{
			name:    "a location's deny list stays on its route",
			http:    up + "server {\nlisten 80;\nlocation / { deny 192.0.2.7; proxy_set_header Host $host; proxy_pass http://app; }\n}",
			line:    5,
			status:  Translated,
			yaml:    []string{"access:\n      - {deny: 192.0.2.7}"},
			notYAML: []string{"deny: [192.0.2.7]"},
		},
		{
			name:    "the http block's deny list becomes the edge deny list",
			http:    up + "deny 192.0.2.7;\nserver {\nlisten 80;\nlocation / { proxy_set_header Host $host; proxy_pass http://app; }\n}",
			line:    6,
			status:  Translated,
			yaml:    []string{"deny: [192.0.2.7]"},
			notYAML: []string{"access:"},
		},
		{
			name:   "try_files to a named location proxies there",
			http:   up + "server {\nlisten 80;\nlocation / { try_files $uri @app; }\nlocation @app { proxy_set_header Host $host; proxy_pass http://app; }\n}",
			line:   5,
			status: Translated,
			yaml:   []string{"handed to location @app", "pool: app", "try_files: [$uri, '@pool']"},
		},
		{
			name:   "error_page 418 = @named; return 418 hands over to the named location",
			http:   up + "server {\nlisten 80;\nlocation /git/ { error_page 418 = @w; return 418; }\nlocation @w { proxy_pass http://app; }\nlocation / { return 404; }\n}",
			line:   5,
			status: Translated,
			yaml:   []string{"path: /git/\n    pool: app"},
		},
		{
			name:   "an https upstream keeps nginx's unverified TLS",
			http:   "server {\nlisten 80;\nlocation / { proxy_pass https://10.0.0.5; }\n}",
			line:   4,
			status: Translated,
			yaml:   []string{"insecure_skip_verify: true", "addr: '10.0.0.5:443'"},
		},
		{
			name:   "regex locations keep their expression, case-insensitive ones too",
			http:   up + "server {\nlisten 80;\nlocation ~ ^/(api|feeds)/ { proxy_pass http://app; }\nlocation ~* \\.php$ { proxy_pass http://app; }\nlocation ^~ /static/ { proxy_pass http://app; }\n}",
			line:   5,
			status: Translated,
			yaml:   []string{"path: {regex: ^/(api|feeds)/}", "path: {regex: \\.php$, case_insensitive: true}", "path: {starts_with: /static/, before_regex: true}"},
		},
		{
			name:   "a regex nested in a prefix location matches below that prefix only",
			http:   up + "server {\nlisten 80;\nlocation /up/ {\nproxy_pass http://app;\nlocation ~ \\.png$ { return 404; }\n}\n}",
			line:   7,
			status: TranslatedDiffers, needs: []Need{NeedRegexLocations},
			yaml: []string{"path: {regex: ^/up/.*\\.png$}"},
		},
		{
			name:   "location = next to the same prefix is an exact route beside a prefix route",
			http:   up + "server {\nlisten 80;\nlocation = / { proxy_pass http://app; }\nlocation / { proxy_pass http://app; }\n}",
			line:   5,
			status: Translated,
			yaml:   []string{"path: {exact: /}", "path: /"},
		},
		{
			name:   "a single-page app's try_files becomes the static chain",
			http:   "server {\nlisten 80;\nroot /srv/app;\nindex index.html index.htm;\nlocation / { try_files $uri $uri/ /index.html; }\n}",
			line:   6,
			status: Translated,
			yaml:   []string{"static:\n      root: /srv/app\n      index: [index.html, index.htm]", "try_files: [$uri, $uri/, /index.html]"},
		},
		{
			name:   "files beside a proxied app fall back to its pool",
			http:   up + "server {\nlisten 80;\nroot public;\nlocation / { try_files $uri @app; }\nlocation @app { proxy_set_header Host $host; proxy_pass http://app; }\n}",
			line:   6,
			status: Translated,
			yaml:   []string{"pool: app", "root: /usr/share/nginx/public", "try_files: [$uri, '@pool']"},
		},
		{
			name:   "an alias naming one file serves that file",
			http:   "server {\nlisten 80;\nlocation = /config.js { alias /etc/app/config.js; }\nlocation / { return 404; }\n}",
			line:   4,
			status: Translated,
			yaml:   []string{"path: {exact: /config.js}", "root: /etc/app\n      try_files: [/config.js]"},
		},
		{
			name:   "a root set by a variable is resolved",
			http:   "server {\nlisten 80;\nset $pub /srv/forum/public;\nlocation /assets/ { root $pub; expires 1y; add_header Cache-Control public; }\n}",
			line:   5,
			status: TranslatedDiffers,
			yaml:   []string{"path: /assets/", "root: /srv/forum/public", "cache_control: public", "expires: 8760h"},
		},
		{
			name:   "return 404 answers nginx's 404 page to every method",
			http:   up + "server_tokens off;\nserver {\nlisten 80;\nlocation / { proxy_pass http://app; }\nlocation /private/ { return 404; }\n}",
			line:   7,
			status: Translated,
			yaml:   []string{"path: /private/", "respond: {status: 404, body: \"<html>\\r\\n<head><title>404 Not Found</title>", "content_type: text/html}"},
		},
		{
			name:   "a location whose rewrite redirects every request becomes a redirect route",
			http:   up + "server {\nlisten 80;\nlocation / { proxy_pass http://app; }\nlocation /old/ { rewrite ^/(.*)$ https://new.example/$1 permanent; }\n}",
			line:   6,
			status: Translated,
			yaml:   []string{"path: /old/\n    redirect: {url: 'https://new.example${uri}${is_args}${args}', status: 301}"},
		},
		{
			name:   "a location rewrite that redirects only some paths is listed",
			http:   up + "server {\nlisten 80;\nlocation / { proxy_pass http://app; }\nlocation /p { rewrite ^/p/(\\d+)$ /post/$1 permanent; proxy_pass http://app; }\n}",
			line:   6,
			status: TranslatedDiffers, needs: []Need{NeedRedirects},
			notYAML: []string{"redirect:"},
		},
		{
			name:    "if ($request_method = OPTIONS) { add_header ...; return 204; } becomes an OPTIONS route that answers itself",
			http:    up + "server {\nlisten 80;\nlocation / { proxy_pass http://app; }\nlocation /api/ {\nif ($request_method = OPTIONS) { add_header Access-Control-Allow-Origin \"*\"; add_header Content-Length 0; return 204; }\nallow 10.0.0.0/8; deny all;\nproxy_pass http://app;\n}\n}",
			line:    6,
			status:  Translated,
			yaml:    []string{"name: default-api-options\n    listeners: [http]\n    path: /api/\n    match:\n      methods: [OPTIONS]\n    respond: {status: 204, content_type: text/plain}", "Access-Control-Allow-Origin: '*'", "respond: {status: 204, content_type: text/plain}\n    max_body_bytes: 1MiB # nginx's default client_max_body_size\n    # nginx add_header\n    response_headers:\n      add:\n        Access-Control-Allow-Origin: '*'\n    # nginx allow/deny, first match wins\n    access:\n      - {allow: 10.0.0.0/8}"},
			notYAML: []string{"Content-Length: "},
		},
		{
			name:   "return 200 text answers the text as the default_type",
			http:   up + "default_type application/octet-stream;\nserver {\nlisten 80;\nlocation / { proxy_pass http://app; }\nlocation = /healthz { access_log off; return 200 \"ok\\n\"; }\nlocation = /.well-known/matrix/server { default_type application/json; return 200 '{\"m.server\": \"x:443\"}'; }\n}",
			line:   7,
			status: Translated,
			yaml:   []string{"respond: {status: 200, body: \"ok\\n\", content_type: application/octet-stream}", "respond: {status: 200, body: '{\"m.server\": \"x:443\"}', content_type: application/json}"},
		},
		{
			name:   "return with variables in its text is listed, not answered",
			http:   up + "server {\nlisten 80;\nlocation / { proxy_pass http://app; }\nlocation /ip { return 200 $remote_addr; }\n}",
			line:   6,
			status: NotTranslated, needs: []Need{NeedFixedAnswers},
			reason: "holds variables",
		},
		{
			name:   "internal answers clients 404 and never proxies",
			http:   up + "server {\nlisten 80;\nlocation / { proxy_pass http://app; }\nlocation /x/ { internal; proxy_pass http://app; }\n}",
			line:   6,
			status: TranslatedDiffers,
			yaml:   []string{"path: /x/\n    respond: {status: 404"},
		},
		{
			name:   "a server without location / serves its root for the other paths",
			http:   up + "server {\nlisten 80;\nroot /srv/www;\nlocation /api/ { proxy_pass http://app; }\n}",
			line:   3,
			status: Translated,
			yaml:   []string{"path: /\n    default: true\n    max_body_bytes: 1MiB # nginx's default client_max_body_size\n    static:\n      root: /srv/www"},
		},
		{
			name:   "gzip becomes gzip compression with nginx's types and level",
			http:   up + "gzip on;\ngzip_types application/json;\nserver {\nlisten 80;\nlocation / { proxy_set_header Host $host; proxy_pass http://app; }\n}",
			line:   7,
			status: TranslatedDiffers, needs: []Need{NeedGzip},
			yaml: []string{"compress:", "encodings: [gzip]", "types: [text/html, application/json]", "min_length: 20", "gzip: 1"},
		},
		{
			name:   "try_files to a PHP front controller serves the files and answers 503 for the rest, as the held PHP location does",
			http:   "server {\nlisten 80;\nindex index.php index.html;\nlocation / { try_files $uri $uri/ /index.php?$args; }\nlocation ~ \\.php$ { fastcgi_pass 127.0.0.1:9000; }\nlocation /s/ { root /srv; }\n}",
			line:   5,
			status: TranslatedDiffers, needs: []Need{NeedFastCGI},
			reason: "which location ~ \\.php$ (t.conf:6) ran as a script; sturdy answers them 503",
			// index.php would be served as a file: only index.html (the default) is kept
			yaml:    []string{"try_files: [$uri, $uri/, =503]", "path: {regex: \\.php$}\n    pool: refused"},
			notYAML: []string{"index: [index.php"},
		},
		{
			name:   "a FastCGI location with try_files $uri =404 is held closed, never served as files",
			http:   "server {\nlisten 80;\nroot /srv/www;\nlocation ~ \\.php$ { try_files $uri =404; fastcgi_pass unix:/run/php.sock; }\nlocation / { }\n}",
			line:   5,
			status: NotTranslated, needs: []Need{NeedFastCGI},
			reason: "its requests get a refusal (503)",
			yaml:   []string{"path: {regex: \\.php$}\n    pool: refused"},
		},
		{
			name:   "a server that sends every request to https becomes the listener's redirect_https",
			http:   up + "server {\nlisten 80;\nreturn 301 https://$host$request_uri;\nlocation / { proxy_pass http://app; }\n}\nserver {\nlisten 443 ssl;\nssl_certificate c.pem;\nssl_certificate_key k.pem;\nlocation / { proxy_pass http://app; }\n}",
			line:   3,
			status: Translated,
			yaml:   []string{"redirect_https:\n      status: 301"},
		},
		{
			name:   "location / returning the https redirect next to ACME challenges",
			http:   up + "server {\nlisten 80;\nserver_name a.example;\nlocation /.well-known/acme-challenge/ { root /srv/acme; }\nlocation / { return 308 https://$host$request_uri; }\n}\nserver {\nlisten 443 ssl;\nssl_certificate c.pem;\nssl_certificate_key k.pem;\nlocation / { proxy_pass http://app; }\n}",
			line:   7,
			status: Translated,
			yaml:   []string{"redirect_https:\n      status: 308", "path: /.well-known/acme-challenge/"},
		},
		{
			name:   "proxy_pass to a map-chosen pool becomes backends with the map's conditions and split_clients' shares",
			http:   "upstream stable { server 10.0.0.1:8080; }\nupstream canary { server 10.0.0.2:8080; }\nsplit_clients \"${remote_addr}\" $share { 10% canary; * stable; }\nmap $cookie_pin $pinned { canary canary; default $share; }\nmap $http_x_force $pool { ~^yes canary; default $pinned; }\nserver {\nlisten 80;\nlocation / { proxy_set_header Host $host; proxy_pass http://$pool; }\n}",
			line:   9,
			status: TranslatedDiffers, needs: []Need{NeedVariables},
			reason:  "sturdy spreads requests evenly by weight",
			yaml:    []string{"- {pool: canary, header: {name: X-Force, regex: ^yes}}", "- {pool: canary, cookie: {name: pin, regex: '^(?i:canary)$'}}", "- {pool: canary, weight: 1000}", "- {pool: stable, weight: 9000}"},
			notYAML: []string{"    pool: stable\n"},
		},
		{
			name:   "a map on something sturdy cannot choose by keeps the location listed",
			http:   up + "map $uri $p { /x app; default app; }\nserver {\nlisten 80;\nlocation /m/ { proxy_pass http://$p; }\nlocation / { proxy_pass http://app; }\n}",
			line:   6,
			status: NotTranslated, needs: []Need{NeedVariables},
			reason: "reads $uri",
		},
		{
			name:   "a map on the method before one on a header becomes a companion route per method, with the header's backends for the rest",
			http:   up + "upstream api { server 10.0.0.2:8080; }\nmap $http_accept $by_accept { default http://app; ~^application/activity http://api; }\nmap $request_method $target { default $by_accept; POST http://api; PUT http://api; }\nserver {\nlisten 80;\nlocation / { proxy_set_header Host $host; proxy_pass $target; }\n}",
			line:   8,
			status: Translated,
			yaml:   []string{"match:\n      methods: [POST, PUT]\n    pool: api", "- {pool: api, header: {name: Accept, regex: ^application/activity}}\n      - {pool: app, weight: 1}"},
		},
		{
			name:   "a map on the method after one on a header is listed: sturdy would test the method first",
			http:   up + "map $request_method $by_method { default app; POST app2; }\nmap $http_x $target { default $by_method; yes app; }\nserver {\nlisten 80;\nlocation / { proxy_set_header Host $host; proxy_pass http://$target; }\nlocation /o/ { proxy_pass http://app; }\n}",
			line:   7,
			status: NotTranslated, needs: []Need{NeedVariables},
			reason: "tests the method after other conditions",
		},
		{
			name:   "rewrite ... last to a literal path proxies where nginx's new location proxies",
			http:   up + "server {\nlisten 80;\nlocation ~ ^/t/[a-z]+/bind$ { rewrite ^ /bind last; }\nlocation = /bind { proxy_pass http://app/http-bind; }\nlocation / { proxy_pass http://app; }\n}",
			line:   5,
			status: Translated,
			yaml:   []string{"path: {regex: '^/t/[a-z]+/bind$'}", "rewrite: {regex: ^, path: /http-bind}"},
		},
		{
			name:    "rewrite ... last to a path built from captures routes the new path again, with nothing of the location",
			http:    up + "server {\nlisten 80;\nlocation ~ \"^/static/[0-9a-f]{8}/(.*)$\" { rewrite \"^/static/[0-9a-f]{8}/(.*)\" /$1 last; add_header X-A b; }\nlocation / { proxy_pass http://app; }\n}",
			line:    5,
			status:  Translated,
			yaml:    []string{"path: {regex: '^/static/[0-9a-f]{8}/(.*)$'}\n    # nginx's rewrite ... last: the new path is routed again\n    rewrite: {regex: '^/static/[0-9a-f]{8}/(.*)', path: '/${1}', rematch: true}\n  #"},
			notYAML: []string{"X-A"},
		},
		{
			name:   "rewrite ... last whose regex matches fewer paths than its location says what the others get",
			http:   up + "server {\nlisten 80;\nlocation /t/ { rewrite ^/t/([a-z]+)$ /$1 last; }\nlocation / { proxy_pass http://app; }\n}",
			line:   5,
			status: TranslatedDiffers, needs: []Need{NeedRewrites},
			reason: "does not match got nginx's files; sturdy answers them 404",
			yaml:   []string{"rewrite: {regex: '^/t/([a-z]+)$', path: '/${1}', rematch: true}"},
		},
		{
			name:   "rewrite ... break, then try_files $uri @app: the route proxies the rewritten path, and never serves files from the client's path",
			http:   up + "server {\nlisten 80;\nroot /srv;\nlocation ~ ^/static/(thumbs|avatars)/ { rewrite ^/static/(.*)$ /$1 break; try_files $uri @app; }\nlocation @app { proxy_pass http://app; }\nlocation / { proxy_pass http://app; }\n}",
			line:   6,
			status: TranslatedDiffers, needs: []Need{NeedStatic},
			reason:  "looked for files under the rewritten path first; sturdy sends every request to location @app",
			yaml:    []string{"path: {regex: ^/static/(thumbs|avatars)/}\n    pool: app", "rewrite: {regex: ^/static/(.*)$, path: '/${1}'}"},
			notYAML: []string{"root: /srv"},
		},
		{
			name:   "several rewrite ... break in turn: each before the last is a route of its own, ranked above the location's",
			http:   up + "server {\nlisten 80;\nlocation ~ ^/static/(videos|lists)/ { rewrite ^/static/videos/(.*)$ /v/$1 break; rewrite ^/static/(.*)$ /$1 break; proxy_pass http://app; }\nlocation / { proxy_pass http://app; }\n}",
			line:   5,
			status: Translated,
			yaml:   []string{"path: {regex: ^/static/videos/(.*)$}\n    pool: app", "rewrite: {regex: ^/static/videos/(.*)$, path: '/v/${1}'}\n    host_header: app # nginx's Host\n    forwarding_headers: [] # only those nginx sent\n  # server at t.conf:", "path: {regex: ^/static/(videos|lists)/}\n    pool: app", "rewrite: {regex: ^/static/(.*)$, path: '/${1}'}"},
		},
		{
			name:   "several rewrite ... break in turn stay listed where the first could match paths of other locations",
			http:   up + "server {\nlisten 80;\nlocation ~ ^/static/(videos|lists)/ { rewrite ^/other/(.*)$ /v/$1 break; rewrite ^/static/(.*)$ /$1 break; proxy_pass http://app; }\nlocation / { proxy_pass http://app; }\n}",
			line:   5,
			status: NotTranslated, needs: []Need{NeedRewrites},
			reason: "2 rewrites in turn",
		},
		{
			name:   "an alias location without trailing slashes answers 404 for the paths that continue its last segment, with its access rules",
			http:   up + "server {\nlisten 80;\nlocation /avatar { alias /srv/avatars; allow 10.0.0.0/8; deny all; }\nlocation / { proxy_pass http://app; }\n}",
			line:   5,
			status: TranslatedDiffers, needs: []Need{NeedStatic},
			reason: "read the file /srv/avatarsX next to the alias",
			yaml:   []string{"path: /avatar\n", "match:\n      path: {starts_with: /avatar}\n    respond: {status: 404,", "name: default-avatar-continued"},
		},
		{
			name:   "try_files to a front controller + $request_uri: one PHP location takes every such URI, so missing files get its 503",
			http:   up + "server {\nlisten 80;\nroot /srv;\nlocation ~ ^/(?:data|config)(?:/|$) { return 404; }\nlocation ~ \\.php(?:$|/) { fastcgi_pass 127.0.0.1:9000; }\nlocation ~ \\.css$ { try_files $uri /index.php$request_uri; }\nlocation / { try_files $uri $uri/ /index.php$request_uri; }\n}",
			line:   9,
			status: TranslatedDiffers, needs: []Need{NeedFastCGI},
			reason: "/index.php$request_uri (t.conf:9), which location ~ \\.php(?:$|/) (t.conf:7) ran as a script",
			yaml:   []string{"try_files: [$uri, $uri/, =503]", "try_files: [$uri, =503]"},
		},
		{
			name:   "try_files to a front controller + $request_uri stays listed where a regex before could take some of them",
			http:   up + "server {\nlisten 80;\nroot /srv;\nlocation ~ \\.css$ { return 404; }\nlocation ~ \\.php(?:$|/) { fastcgi_pass 127.0.0.1:9000; }\nlocation / { try_files $uri /index.php$request_uri; }\nlocation /api/ { proxy_pass http://app; }\n}",
			line:   8,
			status: NotTranslated, needs: []Need{NeedRewrites},
			reason: "a URI built per request",
		},
		{
			name:   "proxy_pass with a query and variables sends exactly that query",
			http:   up + "server {\nlisten 80;\nset $prefix \"\";\nlocation = /ws { proxy_pass http://app/ws?prefix=$prefix&$args; }\nlocation / { proxy_pass http://app; }\n}",
			line:   6,
			status: Translated,
			yaml:   []string{"rewrite: {path: /ws, query: 'prefix=&${args}'}"},
		},
		{
			name:   "rewrite ... last to a location whose proxy_pass builds the URI from variables takes the values the first location set",
			http:   up + "server {\nlisten 80;\nset $prefix \"\";\nlocation = /ws { proxy_pass http://app/ws?prefix=$prefix&$args; }\nlocation ~ ^/([a-z]+)/ws$ { set $prefix \"$1\"; rewrite ^ /ws; }\nlocation / { proxy_pass http://app; }\n}",
			line:   7,
			status: Translated,
			yaml:   []string{"path: {regex: '^/([a-z]+)/ws$'}\n    pool: app", "rewrite: {path: /ws, query: 'prefix=${1}&${args}'}"},
		},
		{
			name:   "proxy_set_header with the variable that chose the backend sends each backend's value; a method route gets its own",
			http:   up + "upstream api { server 10.0.0.2:8080; }\nmap $http_x_side $side { api api; default app; }\nmap $request_method $target { POST api; default $side; }\nserver {\nlisten 80;\nlocation / { proxy_set_header Host $host; proxy_set_header X-Side $target; proxy_pass http://$target; }\n}",
			line:   8,
			status: Translated,
			yaml:   []string{"- {pool: api, header: {name: X-Side, regex: '^(?i:api)$'}, request_headers: {set: {X-Side: api}}}", "- {pool: app, weight: 1, request_headers: {set: {X-Side: app}}}", "methods: [POST]\n    pool: api", "X-Side: api\n"},
		},
		{
			name:   "try_files to a named location that rewrites everything to one file (break) is that file",
			http:   up + "server {\nlisten 80;\nroot /srv/web;\nlocation ~ ^/([a-z0-9]+)$ { try_files $uri @client; }\nlocation @client { rewrite ^ / break; }\nlocation /api/ { proxy_pass http://app; }\n}",
			line:   6,
			status: Translated,
			yaml:   []string{"static:\n      root: /srv/web\n      try_files: [$uri, /]"},
		},
		{
			name:   "if ($host = www...) { return 301 ...; } gives that name a redirect route",
			http:   up + "server {\nlisten 80;\nserver_name a.example www.a.example;\nif ($host = www.a.example) { return 301 http://a.example$request_uri; }\nlocation / { proxy_pass http://app; }\n}\nserver {\nlisten 80 default_server;\nlocation / { proxy_pass http://app; }\n}",
			line:   3,
			status: Translated,
			yaml:   []string{"hosts: [www.a.example]\n    path: /\n    redirect: {url: 'http://a.example${request_uri}', status: 301}", "hosts: [a.example]\n    path: /\n    pool: app"},
		},
		{
			name:   "a server's rewrite ... permanent is a regex redirect route, with the client's query as nginx appended it",
			http:   up + "server {\nlisten 80;\nrewrite ^/old/(.*)$ /new/$1 permanent;\nrewrite ^/gone$ https://b.example/? redirect;\nlocation / { proxy_pass http://app; }\n}",
			line:   3,
			status: Translated,
			yaml:   []string{"path: {regex: ^/old/(.*)$}\n    redirect: {url: '${scheme}://${http_host}/new/${1}${is_args}${args}', status: 301}", "redirect: {url: 'https://b.example/', status: 302}", "path: /\n    default: true\n    pool: app"},
		},
		{
			name:    "proxy_request_buffering off (a registry's uploads) streams bodies on that location, inherited from the server; elsewhere bodies wait whole as in nginx",
			http:    up + "server {\nlisten 80;\nproxy_request_buffering off;\nlocation /v2/ { proxy_pass http://app; }\nlocation /ui/ { proxy_request_buffering on; proxy_pass http://app; }\n}",
			line:    6,
			status:  Translated,
			yaml:    []string{"path: /v2/\n    pool: app\n", "request_buffering: false # nginx proxy_request_buffering off: bodies stream to the backend as they arrive"},
			notYAML: []string{"path: /ui/\n    pool: app\n    timeouts:\n      connect: 5s\n      response_header: 30s\n    max_body_bytes: 1MiB # nginx's default client_max_body_size\n    request_buffering"},
		},
		{
			name:    "a prefix location that proxies keeps sturdy's redirect of its path without the slash, as nginx redirects; one that serves files turns it off",
			http:    up + "server {\nlisten 80;\nlocation /app/ { proxy_pass http://app; }\nlocation /files/ { root /srv; }\nlocation / { proxy_pass http://app; }\n}",
			line:    3,
			status:  Translated,
			yaml:    []string{"path: /app/\n    pool: app\n", "dotfiles: allow # nginx serves files whose names start with a dot\n    trailing_slash_redirect: false # nginx redirects a path without its trailing slash only for a location that proxies"},
			notYAML: []string{"pool: app\n    trailing_slash_redirect"},
		},
		{
			name:    "nginx's merge_slashes becomes the listener's, so a repeated slash cannot pass a protected prefix",
			http:    up + "server {\nlisten 80;\nlocation /admin/ { allow 10.0.0.0/8; deny all; proxy_pass http://app; }\nlocation = /metrics { deny all; proxy_pass http://app; }\nlocation / { proxy_pass http://app; }\n}",
			line:    5,
			status:  Translated,
			yaml:    []string{"listen: :80\n"},
			notYAML: []string{"pool: refused", "-slashes", "merge_slashes"},
		},
		{
			name:   "nginx's underscores_in_headers on keeps header names with underscores on the listener; off (the default) drops them as sturdy does",
			http:   up + "server {\nlisten 80;\nunderscores_in_headers on;\nlocation / { proxy_pass http://app; }\n}\nserver {\nlisten 81;\nlocation / { proxy_pass http://app; }\n}",
			line:   3,
			status: Translated,
			yaml:   []string{"listen: :80\n    allow_underscores_in_headers: true # nginx underscores_in_headers on (or ignore_invalid_headers off)", "listen: :81\n# Request hygiene"},
		},
		{
			name:    "a protected prefix refuses its path written with a repeated slash where a server on its listener keeps slashes",
			http:    up + "server {\nlisten 80;\nserver_name a.test;\nlocation /admin/ { allow 10.0.0.0/8; deny all; proxy_pass http://app; }\nlocation = /metrics { deny all; proxy_pass http://app; }\nlocation / { proxy_pass http://app; }\n}\nserver {\nlisten 80;\nserver_name b.test;\nmerge_slashes off;\nlocation / { proxy_pass http://app; }\n}",
			line:    6,
			status:  Translated,
			yaml:    []string{"path: {regex: '^(?://+admin/+|/+admin//+)'}\n    pool: refused", "path: {regex: '^(?://+metrics)/*$'}\n    pool: refused", "merge_slashes: false # nginx merge_slashes off on a server here"},
			notYAML: []string{"path: {regex: '^(?://+)'}", "merge_slashes: true"},
		},
		{
			name:   "a FastCGI location is held closed, so its PHP files are not served from the root",
			http:   "server {\nlisten 80;\nroot /srv/www;\nlocation ~ \\.php$ { fastcgi_pass unix:/run/php.sock; }\nlocation / { try_files $uri $uri/ =404; }\n}",
			line:   5,
			status: NotTranslated, needs: []Need{NeedFastCGI},
			reason: "its requests get a refusal (503)",
			yaml:   []string{"path: {regex: \\.php$}\n    pool: refused"},
		},
		{
			name:   "listen proxy_protocol with set_real_ip_from becomes proxy_protocol: required",
			http:   up + "set_real_ip_from 10.0.0.0/8;\nreal_ip_header proxy_protocol;\nserver {\nlisten 8080 proxy_protocol;\nlocation / { proxy_set_header Host $host; proxy_pass http://app; }\n}",
			line:   5,
			status: Translated,
			yaml:   []string{"listen: :8080\n    proxy_protocol: required", "trusted_proxies: [10.0.0.0/8]"},
		},
		{
			name:    "a location that sets no Upgrade header for the backend is not upgraded, as in nginx; one that passes $http_upgrade is",
			http:    up + "server {\nlisten 80;\nlocation /ws/ { proxy_http_version 1.1; proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection upgrade; proxy_pass http://app; }\nlocation /-/cable { proxy_http_version 1.1; proxy_pass http://app; }\n}",
			line:    6,
			status:  Translated,
			yaml:    []string{"path: {starts_with: /-/cable}\n    pool: app\n    timeouts:\n      connect: 5s\n      response_header: 30s\n    max_body_bytes: 1MiB # nginx's default client_max_body_size\n    upgrades: []"},
			notYAML: []string{"path: /ws/\n    pool: app\n    timeouts:\n      connect: 5s\n      response_header: 30s\n    max_body_bytes: 1MiB # nginx's default client_max_body_size\n    upgrades"},
		},
		{
			name:   "return 444 in a location closes the connection as nginx did",
			http:   up + "server {\nlisten 80;\nlocation /wp-admin/ { return 444; }\nlocation / { proxy_pass http://app; }\n}",
			line:   5,
			status: Translated,
			yaml:   []string{"path: /wp-admin/\n    respond: {close: true} # nginx's return 444"},
		},
		{
			name:   "a 302 to https is a redirect route",
			http:   up + "server {\nlisten 80;\nreturn 302 https://$host$request_uri;\n}\nserver {\nlisten 81;\nlocation / { proxy_pass http://app; }\n}",
			line:   3,
			status: Translated,
			yaml:   []string{"redirect: {url: 'https://${host}${request_uri}', status: 302}"},
		},
		{
			name:   "return 301 in a location is a redirect route; a relative target gets nginx's scheme and host",
			http:   up + "server {\nlisten 80;\nlocation = /old { return 301 /new; }\nlocation ~ ^/u/(\\w+)$ { return 302 https://users.example/$1; }\nlocation / { proxy_pass http://app; }\n}",
			line:   5,
			status: Translated,
			yaml:   []string{"redirect: {url: '${scheme}://${http_host}/new', status: 301}", "redirect: {url: 'https://users.example/${1}', status: 302}"},
		},
		{
			name:    "a default server redirecting to its own name sends unknown hosts there",
			http:    up + "server {\nlisten 80 default_server;\nserver_name a.example;\nreturn 301 https://$server_name$request_uri;\n}\nserver {\nlisten 443 ssl;\nssl_certificate c.pem;\nssl_certificate_key k.pem;\nlocation / { proxy_pass http://app; }\n}",
			line:    3,
			status:  Translated,
			yaml:    []string{"redirect: {url: 'https://a.example${request_uri}', status: 301}"},
			notYAML: []string{"redirect_https"},
		},
		{
			name:   "if ($scheme = http) in a server on both listeners redirects on the plain one",
			http:   up + "server {\nlisten 80;\nlisten 443 ssl;\nssl_certificate c.pem;\nssl_certificate_key k.pem;\nserver_name a.example;\nif ($scheme = http) { return 301 https://$host$request_uri; }\nlocation / { proxy_pass http://app; }\n}\nserver {\nlisten 80;\nserver_name b.example;\nlocation / { proxy_pass http://app; }\n}",
			line:   3,
			status: Translated,
			yaml:   []string{"listeners: [http]\n    path: /\n    default: true\n    redirect: {url: 'https://${host}${request_uri}', status: 301}", "name: a.example-2\n    listeners: [https]"},
		},
		{
			name:    "every server of a TLS listener gets its own certificate, by name",
			http:    up + "server {\nlisten 443 ssl default_server;\nserver_name _;\nssl_reject_handshake on;\n}\nserver {\nlisten 443 ssl;\nserver_name a.example www.a.example;\nssl_certificate a.pem;\nssl_certificate_key a.key;\nssl_protocols TLSv1.2 TLSv1.3;\nlocation / { proxy_pass http://app; }\n}\nserver {\nlisten 443 ssl;\nserver_name b.example;\nssl_certificate b.pem;\nssl_certificate_key b.key;\nadd_header Strict-Transport-Security \"max-age=31536000; includeSubDomains\" always;\nlocation / { proxy_pass http://app; }\n}",
			line:    14,
			status:  TranslatedDiffers,
			yaml:    []string{"- cert: /nonexistent/a.pem\n          key: /nonexistent/a.key\n          names: [a.example, www.a.example]", "names: [b.example]", "unknown_sni: refuse"},
			notYAML: []string{"hsts:", "default: true # the default server's"},
		},
		{
			name:   "client certificates and protocols per listener",
			http:   up + "server {\nlisten 443 ssl;\nssl_certificate a.pem;\nssl_certificate_key a.key;\nssl_protocols TLSv1.3;\nssl_verify_client on;\nssl_client_certificate ca.pem;\nadd_header Strict-Transport-Security \"max-age=63072000\" always;\nlocation / { proxy_pass http://app; }\n}",
			line:   11,
			status: Translated,
			yaml:   []string{"min_version: \"1.3\"", "client_auth:\n        mode: require_and_verify", "ca: /nonexistent/ca.pem", "hsts:\n        max_age: 17520h"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := importCase(t, tt.http)
			b := block(t, res, tt.line)
			if b.Status != tt.status {
				t.Errorf("status %q, want %q: %s", b.Status, tt.status, b.String())
			}
			for _, n := range tt.needs {
				if !slices.Contains(b.Needs, n) {
					t.Errorf("needs %v, want %q among them: %s", b.Needs, n, b.String())
				}
			}
			if tt.reason != "" && !strings.Contains(strings.Join(b.Reasons, "\n"), tt.reason) {
				t.Errorf("reasons lack %q:\n%s", tt.reason, strings.Join(b.Reasons, "\n"))
			}
			for _, y := range tt.yaml {
				if !hasRoute(res, y) {
					t.Errorf("the YAML lacks %q:\n%s", y, res.YAML)
				}
			}
			for _, y := range tt.notYAML {
				if hasRoute(res, y) {
					t.Errorf("the YAML has %q:\n%s", y, res.YAML)
				}
			}
		})
	}
}
