package translate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
)

// Routes that stand for what sturdy cannot translate: refusals of
// protected locations, and held locations that ran code, so that their
// requests never reach another route; and the record of named locations.

func (t *translator) refusalRoutes(c *locCtx) []*route {
	where := c.sp.label
	if c.loc != nil {
		where += ", location " + locationLabel(c.loc) + " (" + c.loc.Dir.Pos() + ")"
	}
	ns := c.refusalNotes()
	body := fmt.Sprintf("Refused: %s was restricted in nginx (%s), and sturdy cannot serve it with the same restriction yet, so it refuses every request here instead of opening it.\n", where, strings.Join(ns.reasons(), "; "))
	var out []*route
	for _, v := range c.sp.variants {
		for _, p := range c.paths {
			r := &route{listeners: v.listeners, hosts: v.hosts, path: p, match: c.match, pool: t.refusalPool(), sorryBody: body, tries: 1, maxBody: "1MiB", maxBodyDefault: true}
			r.comments = []string{where + ": REFUSED, never opened: " + strings.Join(ns.reasons(), "; ")}
			r.name = t.routeName(c.sp, v, p) + "-refused"
			out = append(out, r)
		}
	}
	return out
}

// namedBlock records a named location: translated when a translated
// location hands requests to it.
func (t *translator) namedBlock(sp *serverPlan, l *nginx.Location) {
	b := &Block{File: l.Dir.File, Line: l.Dir.Line, Server: sp.label, Location: l.Path, Status: NotTranslated}
	t.use(l.Dir)
	for _, o := range t.blocks {
		if o.Server == sp.label && o.Status != NotTranslated && len(o.Routes) > 0 && slices.ContainsFunc(t.routesOut, func(r *route) bool {
			return slices.Contains(o.Routes, r.name) && slices.ContainsFunc(r.comments, func(c string) bool { return strings.Contains(c, "handed to location "+l.Path+" ") })
		}) {
			b.Status = Translated
			b.Reasons = []string{"reached through " + o.Location}
			break
		}
	}
	if b.Status == NotTranslated {
		b.Reasons = []string{"named location: reached only through try_files or error_page of locations that were not translated"}
	}
	t.blocks = append(t.blocks, b)
}

// holdRoutes keep a location sturdy cannot translate closed: its match,
// on the refusal pool.
func (t *translator) holdRoutes(c *locCtx) []*route {
	where := c.sp.label + ", location " + locationLabel(c.loc) + " (" + c.loc.Dir.Pos() + ")"
	body := fmt.Sprintf("Not served: nginx answered %s itself (%s), which sturdy cannot do yet; it refuses rather than let another route answer.\n", where, strings.Join(c.blockers.reasons(), "; "))
	if !c.runsCode() {
		body = fmt.Sprintf("Not served: nginx proxied %s in a way sturdy cannot repeat (%s); it refuses rather than let another route answer.\n", where, strings.Join(c.blockers.reasons(), "; "))
	}
	var out []*route
	for _, v := range c.sp.variants {
		for _, p := range c.paths {
			r := &route{listeners: v.listeners, hosts: v.hosts, path: p, match: c.match, pool: t.refusalPool(), sorryBody: body, tries: 1, maxBody: "1MiB", maxBodyDefault: true}
			r.comments = []string{where + ": NOT TRANSLATED, held closed: " + strings.Join(c.blockers.reasons(), "; ")}
			r.name = t.routeName(c.sp, v, p) + "-held"
			out = append(out, r)
		}
	}
	return out
}

// runsCode reports a location nginx answered by running code sturdy does
// not run (FastCGI, uWSGI, SCGI, gRPC, Lua): its paths must not fall
// through to a route that serves the files.
func (c *locCtx) runsCode() bool {
	for _, n := range c.blockers {
		switch n.need {
		case NeedFastCGI, NeedGRPC, NeedLua:
			return true
		}
	}
	return false
}
