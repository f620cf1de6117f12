// Package static serves a route's files from disk, the way nginx's root,
// alias, index and try_files do: a chain of candidates tried in order (the
// file, the directory's index, a fixed file for single-page apps, the
// route's pool, a status), with Range and conditional requests, ETag and
// Last-Modified (net/http's ServeContent), precompressed siblings chosen by
// Accept-Encoding, Content-Type from a built-in table, and Cache-Control
// per route.
//
// Safety: every file is opened through os.Root, which cannot leave the
// directory (not by "..", not by a symlink pointing out); paths with ".."
// segments or NUL are refused before that; dotfiles are refused unless the
// route allows them; FIFOs and devices are never opened for reading.
//
// The file system is read per request and nothing is cached, so a file
// changed on disk is served new and a directory replaced by a deploy (a
// symlink switched to a new release) is followed at once. Compile, at
// config load, reads nothing but the directory's metadata.
//
// Files: static.go (Compile, Handler, Serve: the chain), file.go (one
// file: encoding, headers, ServeContent), mime.go (Content-Type table),
// listing.go (autoindex).
package static

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/proxy/compress"
	"github.com/sturdyproxy/sturdy/internal/wire/plain"
)

// Handler serves one route's files. It is immutable once compiled and safe
// for concurrent use.
type Handler struct {
	dir       string // absolute root or alias directory
	prefix    string // route path, stripped from requests when alias
	alias     bool
	index     []string
	chain     []config.TryFile
	toPool    bool // the chain holds @pool
	autoindex bool
	dotfiles  string
	// cacheControl is shared by every response: read-only.
	cacheControl  []string
	precompressed []compress.Encoding
}

// Compile builds the handler of route i of a validated config, or returns
// nil when the route serves no files. The directory is only looked at: a
// directory that does not exist yet (deploys create it later) is a
// warning, and its requests answer 404 (or go to the pool) until it
// appears; a path that exists but is not a directory is an error.
func Compile(c *config.Config, i int) (h *Handler, warnings []config.Error, err error) {
	r := c.Routes[i]
	s := r.Static
	if s == nil {
		return nil, nil, nil
	}
	p := fmt.Sprintf("routes[%d].static", i)
	key, dir := p+".root", s.Root
	if s.Alias != "" {
		key, dir = p+".alias", s.Alias
	}
	at := func(path, format string, args ...any) config.Error {
		return config.Error{File: c.File, Line: c.Line(path), Path: path, Msg: fmt.Sprintf(format, args...)}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, config.ErrorList{at(key, "cannot resolve %s: %v", dir, err)}
	}
	switch fi, err := os.Stat(abs); {
	case errors.Is(err, fs.ErrNotExist):
		warnings = append(warnings, at(key, "%s does not exist (yet); the route answers 404 for files until it does", abs))
	case err != nil:
		warnings = append(warnings, at(key, "cannot look at %s: %v; files will not be served until sturdy can read it", abs, err))
	case !fi.IsDir():
		return nil, nil, config.ErrorList{at(key, "%s is not a directory; name the directory to serve files from", abs)}
	}
	h = &Handler{
		dir:       abs,
		prefix:    r.Path,
		alias:     s.Alias != "",
		index:     s.Index,
		autoindex: s.Autoindex,
		dotfiles:  s.Dotfiles,
	}
	for j, entry := range s.TryFiles {
		t, err := config.ParseTryFile(entry)
		if err != nil {
			return nil, nil, config.ErrorList{at(fmt.Sprintf("%s.try_files[%d]", p, j), "%v", err)}
		}
		h.chain = append(h.chain, t)
		h.toPool = h.toPool || t.Kind == config.TryPool
	}
	cc := s.CacheControl
	if s.Expires > 0 {
		if cc != "" {
			cc += ", "
		}
		cc += "max-age=" + strconv.FormatInt(int64(s.Expires.D().Seconds()), 10)
	}
	if cc != "" {
		h.cacheControl = []string{cc}
	}
	for _, name := range s.Precompressed {
		e, _ := compress.ParseEncoding(name)
		h.precompressed = append(h.precompressed, e)
	}
	return h, warnings, nil
}

// ToPool reports whether Serve can return false (the chain holds @pool).
// When it does not, Serve answers every request itself and the route
// needs no pool.
func (h *Handler) ToPool() bool { return h.toPool }

// Serve answers r from files, where p is the routed path (r.URL.Path after
// the edge's normalisation). It returns false, having written nothing,
// when the request goes to the route's pool: the chain reached @pool, or
// the method is not GET or HEAD on a route whose chain ends in @pool.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, p string) (served bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if h.toPool {
			return false // POST /login on an app with assets beside it
		}
		w.Header()["Allow"] = allowed
		writeStatus(w, http.StatusMethodNotAllowed)
		return true
	}
	rel, status := h.relative(p)
	if status != 0 {
		writeStatus(w, status)
		return true
	}
	root, err := os.OpenRoot(h.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		writeStatus(w, statusFor(err))
		return true
	}
	if root != nil {
		defer root.Close()
	}
	sawDir := false // a directory without index or listing matched an entry
	for _, t := range h.chain {
		switch t.Kind {
		case config.TryPool:
			return false
		case config.TryStatus:
			writeStatus(w, t.Status)
			return true
		}
		if root == nil {
			continue // the directory is not there (yet)
		}
		name, asDir := expand(t, rel)
		var done bool
		switch {
		case t.Kind == config.TryDir:
			var dir bool
			done, dir = h.tryDir(w, r, root, name, t, p)
			sawDir = sawDir || dir
		case asDir:
			// /a.txt/ names a directory: a file is not it (nginx: 404).
		default:
			done = h.tryFile(w, r, root, name)
		}
		if done {
			return true
		}
	}
	if sawDir {
		// nginx: "directory index of ... is forbidden".
		writeStatus(w, http.StatusForbidden)
		return true
	}
	writeStatus(w, http.StatusNotFound)
	return true
}

var allowed = []string{"GET, HEAD"}

// relative returns the request's path under the directory, or the status
// that refuses it.
func (h *Handler) relative(p string) (rel string, status int) {
	if p == "" {
		p = "/"
	}
	if p[0] != '/' || strings.IndexByte(p, 0) >= 0 || hasDotDot(p) {
		// The edge resolves dot segments before routing; one here was
		// smuggled past it (encoded, or a caller without the edge).
		return "", http.StatusBadRequest
	}
	rel = p
	// Dotfiles are judged on what follows the route's prefix: the operator
	// who routes /.well-known/ to files has decided for that part.
	judged := p
	if strings.HasPrefix(p, h.prefix) {
		judged = p[len(h.prefix):]
		if h.alias {
			rel = "/" + strings.TrimPrefix(judged, "/")
		}
	} else if h.alias {
		return "", http.StatusNotFound // not this route's path
	}
	if h.dotfiles != config.DotfilesAllow && hasDotfile(judged) {
		if h.dotfiles == config.DotfilesForbid {
			return "", http.StatusForbidden
		}
		return "", http.StatusNotFound
	}
	return rel, 0
}

func hasDotDot(p string) bool {
	for p != "" {
		var seg string
		seg, p, _ = strings.Cut(p, "/")
		if seg == ".." {
			return true
		}
	}
	return false
}

// hasDotfile reports a path segment starting with "." other than
// .well-known (ACME challenges, security.txt), which sites must serve.
func hasDotfile(p string) bool {
	for p != "" {
		var seg string
		seg, p, _ = strings.Cut(p, "/")
		if len(seg) > 0 && seg[0] == '.' && seg != ".well-known" {
			return true
		}
	}
	return false
}

// expand turns an entry into a name for os.Root: relative, cleaned, "."
// for the directory itself. asDir reports that the name ended in a slash
// before it was cleaned: only a directory can be it.
func expand(t config.TryFile, rel string) (name string, asDir bool) {
	name = t.Before
	if t.HasURI {
		name = t.Before + rel + t.After
	}
	asDir = strings.HasSuffix(name, "/")
	name = strings.TrimPrefix(path.Clean("/"+name), "/")
	if name == "" {
		return ".", asDir
	}
	return name, asDir
}

// tryFile serves name if it is a regular file; it reports whether it
// answered (a file, or an error that ends the chain).
func (h *Handler) tryFile(w http.ResponseWriter, r *http.Request, root *os.Root, name string) bool {
	f, fi, err := openRegular(root, name)
	if err != nil {
		if missing(err) {
			return false
		}
		writeStatus(w, statusFor(err))
		return true
	}
	h.serveFile(w, r, root, name, f, fi)
	return true
}

// tryDir answers with the directory's index file or listing. A directory
// asked for without its trailing slash is redirected to it first, so that
// the page's relative links resolve inside it. dir reports a directory
// that has neither (done is then false).
func (h *Handler) tryDir(w http.ResponseWriter, r *http.Request, root *os.Root, name string, t config.TryFile, p string) (done, dir bool) {
	fi, err := root.Stat(name)
	if err != nil || !fi.IsDir() {
		if err != nil && !missing(err) {
			writeStatus(w, statusFor(err))
			return true, false
		}
		return false, false
	}
	if t.Before == "" && t.After == "/" && !strings.HasSuffix(p, "/") {
		target := r.URL.EscapedPath() + "/"
		if r.URL.RawQuery != "" {
			target += "?" + r.URL.RawQuery
		}
		http.Redirect(w, r, target, http.StatusMovedPermanently)
		return true, false
	}
	for _, idx := range h.index {
		if h.tryFile(w, r, root, path.Join(name, idx)) {
			return true, false
		}
	}
	if h.autoindex {
		h.list(w, r, root, name, p)
		return true, false
	}
	// No index and no listing: the directory does not match, the chain
	// goes on (a single-page app's /index.html, the pool); where it ends
	// without an answer, 403 as nginx, not 404.
	return false, true
}

// openRegular opens name without blocking (a FIFO in the directory must
// not hold a request forever) and keeps it only if it is a regular file.
func openRegular(root *os.Root, name string) (*os.File, fs.FileInfo, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fs.ErrNotExist
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// missing reports errors that mean "not here": absent, a path through a
// file, a symlink leading out of the directory or looping, a name too long.
// They do not end the chain. Only os.Root can tell an escaping symlink,
// and it says so with an unexported error, so anything that is not a
// permission or I/O failure counts as missing: the safe side, as the file
// is not served either way.
func missing(err error) bool {
	return !errors.Is(err, fs.ErrPermission) && !errors.Is(err, syscall.EIO) &&
		!errors.Is(err, syscall.EMFILE) && !errors.Is(err, syscall.ENFILE)
}

func statusFor(err error) int {
	if errors.Is(err, fs.ErrPermission) {
		return http.StatusForbidden // as nginx: the file is there, sturdy may not read it
	}
	return http.StatusInternalServerError
}

// writeStatus answers with a status and a one-line body.
func writeStatus(w http.ResponseWriter, code int) {
	if code < 200 || code == http.StatusNoContent || code == http.StatusNotModified {
		w.WriteHeader(code) // no body
		return
	}
	plain.Write(w, code, strconv.Itoa(code)+" "+http.StatusText(code)+"\n")
}
