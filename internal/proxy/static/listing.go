package static

import (
	"bytes"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// maxListing bounds the entries read for one listing: a directory of a
// million files must not cost a million stat calls per request.
const maxListing = 5000

// list answers with a plain HTML listing of a directory (autoindex). Names
// are escaped for both the link and the text, dotfiles are left out unless
// the route allows them, and nothing but name, size and time is shown.
func (h *Handler) list(w http.ResponseWriter, r *http.Request, root *os.Root, name, p string) {
	d, err := root.Open(name)
	if err != nil {
		writeStatus(w, statusFor(err))
		return
	}
	defer d.Close()
	entries, err := d.ReadDir(maxListing)
	if err != nil && err != io.EOF {
		writeStatus(w, statusFor(err))
		return
	}
	truncated := len(entries) == maxListing
	slices.SortFunc(entries, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	var b bytes.Buffer
	title := html.EscapeString(p)
	b.WriteString("<!doctype html>\n<meta charset=\"utf-8\">\n<title>Index of " + title + "</title>\n")
	b.WriteString("<h1>Index of " + title + "</h1>\n<table>\n")
	if p != "/" {
		b.WriteString("<tr><td><a href=\"../\">../</a></td><td></td><td></td></tr>\n")
	}
	for _, e := range entries {
		n := e.Name()
		if h.dotfiles != config.DotfilesAllow && strings.HasPrefix(n, ".") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed while listing
		}
		size, slash := strconv.FormatInt(info.Size(), 10), ""
		if e.IsDir() {
			size, slash = "-", "/"
		}
		href := (&url.URL{Path: n}).EscapedPath()
		if strings.Contains(n, ":") {
			href = "./" + href // "a:b" would read as a scheme
		}
		b.WriteString("<tr><td><a href=\"" + html.EscapeString(href) + slash + "\">" + html.EscapeString(n) + slash + "</a></td>")
		b.WriteString("<td>" + size + "</td><td>" + info.ModTime().UTC().Format("2006-01-02 15:04") + "</td></tr>\n")
	}
	b.WriteString("</table>\n")
	if truncated {
		b.WriteString("<p>Only the first " + strconv.Itoa(maxListing) + " entries are listed.</p>\n")
	}
	hdr := w.Header()
	hdr["Content-Type"] = []string{"text/html; charset=utf-8"}
	hdr["X-Content-Type-Options"] = []string{"nosniff"}
	hdr["Content-Length"] = []string{strconv.Itoa(b.Len())}
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(b.Bytes())
	}
}
