// Package status serves the live status page and its JSON. The page is
// static HTML, CSS and JavaScript embedded in the binary (no CDN, works
// offline); it polls the JSON every two seconds and computes rates from
// counter deltas itself, so both show the same view.Status snapshot taken
// at request time, and the server keeps no state per viewer. What needs
// attention is worked out here, once per snapshot (problems.go): grouped
// by cause, ranked by what clients get, worded for operators
// (explain.go), so the page and the JSON's readers see the same list.
package status

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/view"
)

//go:embed assets
var assets embed.FS

// Paths the handler answers. PagePath is also the prefix of the assets.
const (
	PagePath = "/status"
	JSONPath = "/api/status"
)

// asset is one embedded file with its validator.
type asset struct {
	body  []byte
	ctype string
	etag  string
}

// Handler serves the page at PagePath, its assets under PagePath+"/", and
// the snapshot as JSON at JSONPath (?pretty indents it).
type Handler struct {
	snapshot func() view.Status
	files    map[string]asset // by name under PagePath+"/"; "" is the page
}

// New returns a handler that calls snapshot once per JSON request.
func New(snapshot func() view.Status) *Handler {
	h := &Handler{snapshot: snapshot, files: map[string]asset{}}
	sub, _ := fs.Sub(assets, "assets")
	fs.WalkDir(sub, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, _ := fs.ReadFile(sub, name)
		sum := sha256.Sum256(body)
		a := asset{body: body, ctype: contentType(name), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		if name == "index.html" {
			name = ""
		}
		h.files[name] = a
		return nil
	})
	return h
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	return "application/octet-stream"
}

// The page runs only its own script and talks only to its own origin; it
// may not be framed (clickjacking an admin page).
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch p := r.URL.Path; {
	case p == JSONPath:
		h.serveJSON(w, r)
	case p == PagePath+"/":
		// The page refers to its assets and the JSON relatively, which
		// only resolves right from PagePath itself.
		RelativeRedirect(w, "../status", http.StatusMovedPermanently)
	case p == PagePath || strings.HasPrefix(p, PagePath+"/"):
		h.serveAsset(w, r, strings.TrimPrefix(strings.TrimPrefix(p, PagePath), "/"))
	default:
		http.NotFound(w, r)
	}
}

func (h *Handler) serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	a, ok := h.files[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", a.ctype)
	hd.Set("ETag", a.etag)
	// Revalidate every time: after an upgrade the page must not mix old
	// and new files; the ETag makes that a 304.
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Content-Type-Options", "nosniff")
	if name == "" {
		hd.Set("Content-Security-Policy", csp)
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
	}
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
}

func (h *Handler) serveJSON(w http.ResponseWriter, r *http.Request) {
	st := h.snapshot()
	st.Problems = Problems(st)
	explainHosts(st.Pools)
	if st.Problems == nil {
		st.Problems = []view.Problem{} // [] in JSON: the page reads it as "nothing needs attention"
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if _, pretty := r.URL.Query()["pretty"]; pretty {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(st); err != nil {
		// Evidence is free-form (map[string]any); one value JSON cannot
		// hold must not blank the whole page. Show it as text instead.
		buf.Reset()
		st.Events = textEvidence(st.Events)
		if err := enc.Encode(st); err != nil {
			http.Error(w, "cannot encode status: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	// A status must never be served from a cache (incident 004).
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.Write(buf.Bytes())
}

// textEvidence returns a copy of events whose evidence values are strings.
func textEvidence(events []event.Event) []event.Event {
	out := make([]event.Event, len(events))
	for i, e := range events {
		if len(e.Evidence) > 0 {
			ev := make(map[string]any, len(e.Evidence))
			for k, v := range e.Evidence {
				ev[k] = fmt.Sprint(v)
			}
			e.Evidence = ev
		}
		out[i] = e
	}
	return out
}

// RelativeRedirect redirects to a relative reference as it is.
// http.Redirect would turn it into an absolute path, which breaks when the
// admin listener sits behind a proxy that adds a path prefix.
func RelativeRedirect(w http.ResponseWriter, ref string, code int) {
	w.Header().Set("Location", ref)
	w.WriteHeader(code)
}
