package harness

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
)

// staticBody is what the files placed for static locations hold.
const staticBody = "a static file\n"

// placeStatic puts a file where nginx looks for the request's path when
// the location it lands in only serves files (root or alias, no proxying):
// in production such requests mostly find their file, and nginx answers
// 200 with it. Locations that proxy what is not a file (try_files ... @app)
// get no file: their requests are mostly not files.
func placeStatic(prefix string, r request) error {
	// where nginxtest.Rewrite moves absolute roots and aliases; relative
	// ones are in the prefix, as nginx resolves them
	under := func(p string) string {
		if filepath.IsAbs(p) {
			return filepath.Join(prefix, "www", p)
		}
		return filepath.Join(prefix, p)
	}
	path, _, _ := strings.Cut(r.path, "?")
	if r.srv == nil || r.files == "none" || r.files == "" && !servesFiles(r.loc) {
		return nil
	}
	if strings.HasSuffix(path, "/") && r.files != "dir" {
		path += "index.html" // nginx's default index
	}
	var file string
	switch {
	case r.loc != nil && r.loc.Get1("alias") != nil && r.loc.Modifier != "~" && r.loc.Modifier != "~*":
		alias := r.loc.Get1("alias").Arg(0)
		if strings.Contains(alias, "$") {
			return nil
		}
		file = filepath.Join(under(alias), strings.TrimPrefix(path, r.loc.Path))
	default:
		scope := r.srv.Scope
		if r.loc != nil {
			scope = r.loc.Scope
		}
		d := scope.Get1("root")
		switch {
		case d == nil:
			file = filepath.Join(prefix, "html", path) // nginx's default root: html in its prefix
		case strings.Contains(d.Arg(0), "$"):
			return nil
		default:
			file = filepath.Join(under(d.Arg(0)), path)
		}
	}
	if r.files == "dir" {
		return os.MkdirAll(file, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return os.WriteFile(file, []byte(staticBody), 0o644)
}

// servesFiles reports a location (nil: the server itself) whose content
// is files: nothing proxies, answers or hands over to a named location.
func servesFiles(l *nginx.Location) bool {
	if l == nil {
		return true
	}
	for _, name := range []string{"proxy_pass", "return", "fastcgi_pass", "uwsgi_pass", "scgi_pass", "grpc_pass", "rewrite", "content_by_lua_block", "stub_status", "internal"} {
		if len(l.Local(name)) > 0 {
			return false
		}
	}
	for _, d := range l.Local("if") {
		if d.Child("proxy_pass") != nil {
			return false
		}
	}
	if d := l.Get1("try_files"); d != nil && strings.HasPrefix(d.Arg(len(d.Args)-1), "@") {
		return false
	}
	return true
}
