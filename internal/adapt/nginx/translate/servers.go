package translate

import (
	"fmt"

	"github.com/sturdyproxy/sturdy/internal/config"
	"slices"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
)

// serverPlan is how one nginx server block becomes routes.
type serverPlan struct {
	srv   *nginx.Server
	label string
	block *Block
	// variants are where its routes go: hostless on the listeners it is
	// the default server of (nginx sends it every Host no other server
	// names there), with its names on the others.
	variants []variant
	// blockers keep every location of the server from translating (a
	// server-level return answers before any location is chosen).
	blockers notes
	// differs apply to every location of the server.
	differs notes
	// protect refuses every location (an access rule sturdy cannot keep).
	protect notes
	// own are reasons about the server block alone (what happens to
	// requests no location matches).
	own notes
	// clientCert: the server's routes require a verified client certificate.
	clientCert bool
	// catchAll reports that nginx served paths no location matches from
	// the server's root: no location / and no server-level return.
	catchAll bool
	tls      bool
	// schemeIf redirects the plain listeners' requests (answer.go).
	schemeIf *nginx.Directive
	// rewrites are its own rewrite ... redirects as routes (answer.go);
	// rewriteAll: one of them redirects every request.
	rewrites   []*locCtx
	rewriteAll bool
	// hostIfs redirect one of its names each (answer.go).
	hostIfs []*nginx.Directive
	// portOf is the port nginx listened on, by sturdy listener name.
	portOf map[string]string
	// hostAllow and methodIf are its allow-lists (allowlist.go): the
	// hosts and the methods nginx let through, answering the others
	// itself; methods and methodsAnswer are methodIf's.
	hostAllow     *hostAllow
	methodIf      *nginx.Directive
	methods       []string
	methodsAnswer *config.Respond
}

type variant struct {
	listeners []string
	hosts     []string // nil: any host
	tag       string   // added to route names when a server has several variants
}

// plan analyses a server block: its names, where it is the default, and
// what its own rewrite-phase directives do to every request.
func (t *translator) planServer(srv *nginx.Server) *serverPlan {
	sp := &serverPlan{srv: srv, label: serverLabel(srv)}
	sp.block = &Block{File: srv.Dir.File, Line: srv.Dir.Line, Server: sp.label}
	t.use(srv.Dir)
	hosts, hostNotes := t.serverHosts(srv)
	sp.differs = append(sp.differs, hostNotes...)
	var deflt, named []string
	for _, l := range srv.Listens {
		ln := t.listenerOf[l.Addr]
		if ln == nil {
			continue
		}
		sp.tls = sp.tls || ln.ssl
		if sp.portOf == nil {
			sp.portOf = map[string]string{}
		}
		sp.portOf[ln.name] = l.Port
		if t.site.Defaults[l.Addr] == srv {
			deflt = appendOnce(deflt, ln.name)
		} else {
			named = appendOnce(named, ln.name)
		}
	}
	named = slices.DeleteFunc(named, func(n string) bool { return slices.Contains(deflt, n) })
	if len(deflt) > 0 {
		sp.variants = append(sp.variants, variant{listeners: deflt})
	}
	if len(named) > 0 && len(hosts) > 0 {
		sp.variants = append(sp.variants, variant{listeners: named, hosts: hosts})
	}
	if len(sp.variants) == 2 {
		sp.variants[0].tag = "default"
	}
	switch {
	case len(deflt)+len(named) == 0:
		sp.blockers.add("", "none of its listen addresses could be translated (see the listeners above)")
	case len(sp.variants) == 0:
		sp.blockers.add(hostNeed(hostNotes), "no server_name sturdy can match, and it is not the default server of %s, so no request reaches it", strings.Join(named, ", "))
	}
	if d := t.sni[srv]; d != nil {
		sp.differs.add(NeedSNI, "sturdy serves the listener's one certificate, not this server's own (%s)", d.Pos())
	}
	sp.catchAll = !slices.ContainsFunc(srv.Locations, func(l *nginx.Location) bool { return l.Path == "/" && (l.Modifier == "" || l.Modifier == "^~") }) && len(srv.Local("return")) == 0
	sp.schemeIf = t.schemeIf(sp)
	sp.hostIfs = t.hostIfs(sp)
	t.serverAllowLists(sp)
	sp.rewrites, sp.rewriteAll = t.serverRewriteRedirects(sp)
	t.serverRewrite(sp, srv.Scope)
	t.serverSettings(sp)
	for _, d := range srv.Local("if") {
		if code := ifRefuses(d); code != "" && !sp.allowListIf(d) {
			sp.protect.add(NeedConditions, "the server answered %s when %s (%s)", code, strings.Join(d.Args, " "), d.Pos())
		}
	}
	return sp
}

func hostNeed(ns notes) Need {
	for _, n := range ns {
		if n.need != "" {
			return n.need
		}
	}
	return ""
}

// serverRewrite looks at the server's own rewrite-phase directives, which
// nginx runs for every request before it chooses a location.
func (t *translator) serverRewrite(sp *serverPlan, sc *nginx.Scope) {
	rd := t.redirected[sp.srv]
	if rd != nil {
		t.use(rd.via)
		t.useTree(rd.via)
		sp.differs.merge(rd.notes)
	}
	for _, d := range sc.Local("return") {
		t.use(d)
		if rd != nil && rd.via == d {
			continue
		}
		if _, ok := t.serverReturn(sp); ok {
			continue // every request redirects (answer.go)
		}
		sp.blockers.add(returnNeed(d), "the server answers every request itself with %s (%s)", strings.TrimSuffix(d.String(), ";"), d.Pos())
	}
	for _, d := range sc.Local("rewrite") {
		t.use(d)
		if len(sp.rewrites) > 0 {
			continue // redirect routes (answer.go)
		}
		if rewritesEverything(d) {
			sp.blockers.add(rewriteNeed(d), "the server rewrites every request (%s, %s)", strings.TrimSuffix(d.String(), ";"), d.Pos())
		} else {
			sp.differs.add(rewriteNeed(d), "the server rewrites matching requests (%s, %s)", strings.TrimSuffix(d.String(), ";"), d.Pos())
		}
	}
	for _, d := range sc.Local("if") {
		t.use(d)
		t.useTree(d)
		if rd != nil && rd.via == d || sp.schemeIf == d || slices.Contains(sp.hostIfs, d) || sp.allowListIf(d) {
			continue
		}
		if code := ifRefuses(d); code != "" {
			continue // a protection: planServer records it
		}
		for _, x := range append(d.All("return"), d.All("rewrite")...) {
			need := returnNeed(x)
			if x.Name == "rewrite" {
				need = rewriteNeed(x)
			}
			sp.differs.add(need, "the server ran %s when %s (%s)", strings.TrimSuffix(x.String(), ";"), strings.Join(d.Args, " "), x.Pos())
		}
		sp.differs.add(NeedConditions, "the server's if %s (%s) changes some requests", strings.Join(d.Args, " "), d.Pos())
	}
	for _, name := range []string{"rewrite_by_lua_block", "rewrite_by_lua", "rewrite_by_lua_file", "content_by_lua_block", "content_by_lua"} {
		for _, d := range sc.Local(name) {
			t.use(d)
			sp.blockers.add(NeedLua, "%s runs Lua for every request (%s)", d.Name, d.Pos())
		}
	}
	for _, d := range sc.Local("set") {
		t.use(d)
	}
}

// serverSettings notes server-wide behaviour sturdy does not reproduce,
// and the client certificates the server's routes require.
func (t *translator) serverSettings(sp *serverPlan) {
	srv := sp.srv
	for _, n := range append(t.listenNotes[srv], t.sniSettings[srv]...) {
		sp.differs.add(n.need, "%s", n.reason)
	}
	switch v := t.clientCert[srv]; v {
	case "":
	case config.ClientCertRequired:
		sp.clientCert = true
	default:
		sp.protect.add(NeedTLSSettings, "%s", v)
	}
}

func returnNeed(d *nginx.Directive) Need {
	switch d.Arg(0) {
	case "301", "302", "303", "307", "308":
		return NeedRedirects
	}
	if strings.Contains(d.Arg(0), "://") || strings.HasPrefix(d.Arg(0), "$scheme") {
		return NeedRedirects
	}
	return NeedFixedAnswers
}

func rewriteNeed(d *nginx.Directive) Need {
	flag := d.Arg(2)
	if flag == "redirect" || flag == "permanent" || strings.Contains(d.Arg(1), "://") || strings.HasPrefix(d.Arg(1), "$scheme") {
		return NeedRedirects
	}
	return NeedRewrites
}

// rewritesEverything reports whether a rewrite's regex matches every URI.
func rewritesEverything(d *nginx.Directive) bool {
	switch d.Arg(0) {
	case "^", "^(.*)", "^(.*)$", "^/(.*)", "^/(.*)$", "(.*)", ".*", "^.*$":
		return true
	}
	return false
}

// ifRefuses returns the status of a return 401/403/444 directly inside an
// if block, "" when there is none: such an if is an access rule.
func ifRefuses(d *nginx.Directive) string {
	for _, c := range d.Children {
		if c.Name == "return" {
			switch c.Arg(0) {
			case "401", "403", "444":
				return c.Arg(0)
			}
		}
	}
	return ""
}

// serverHosts translates server_name values. "_", "" and friends match no
// real host: only default servers answer unknown hosts.
func (t *translator) serverHosts(srv *nginx.Server) ([]string, notes) {
	var hosts []string
	var ns notes
	for _, d := range srv.Local("server_name") {
		t.use(d)
		for _, n := range d.Args {
			n = strings.ToLower(n)
			switch {
			case n == "_" || n == "" || n == "default_server" || n == "$hostname":
			case strings.HasPrefix(n, "~"):
				ns.add(NeedServerNames, "regular-expression server name %q (%s) is not matched: sturdy matches exact names and *.wildcards", n, d.Pos())
			case strings.HasPrefix(n, ".") && validHost(n[1:]):
				hosts = appendOnce(hosts, n[1:])
				hosts = appendOnce(hosts, "*"+n)
			case strings.HasSuffix(n, ".*") || strings.Count(n, "*") > 1 || (strings.Contains(n, "*") && !strings.HasPrefix(n, "*.")):
				ns.add(NeedServerNames, "server name %q (%s) is not matched: sturdy supports wildcards only as a leading *.", n, d.Pos())
			case !validHost(n):
				ns.add("", "server name %q (%s) is not a host name sturdy can match", n, d.Pos())
			default:
				hosts = appendOnce(hosts, n)
			}
		}
	}
	return hosts, ns
}

// serverLabel names a server for comments and reports.
func serverLabel(srv *nginx.Server) string {
	for _, n := range srv.Names {
		if n != "" && n != "_" && !strings.HasPrefix(n, "~") {
			return "server " + n
		}
	}
	return fmt.Sprintf("server at %s", srv.Dir.Pos())
}
