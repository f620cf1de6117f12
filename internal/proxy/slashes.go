package proxy

import (
	"net/http"
	"strings"
)

// mergeSlashes replaces runs of slashes in r's path with one slash, in
// the decoded and the escaped form alike, so that routes see the path
// nginx's merge_slashes would. A path without "//" costs one scan.
func mergeSlashes(r *http.Request) {
	u := r.URL
	if !strings.Contains(u.Path, "//") {
		return
	}
	u.Path = merged(u.Path)
	if u.RawPath != "" {
		u.RawPath = merged(u.RawPath)
	}
}

func merged(p string) string {
	var b strings.Builder
	b.Grow(len(p))
	for i := 0; i < len(p); i++ {
		if p[i] == '/' && i > 0 && p[i-1] == '/' {
			continue
		}
		b.WriteByte(p[i])
	}
	return b.String()
}
