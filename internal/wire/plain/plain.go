// Package plain writes the short plain-text answers sturdy makes itself
// (errors and refusals, never a backend's answer), with the fields every
// one of them carries: UTF-8 text; nosniff, so that no browser runs a
// reflected path or name as a page; no-store, so that no cache keeps an
// error for the next client.
package plain

import (
	"io"
	"net/http"
	"strconv"
)

// Header sets on h the fields of a plain-text answer of n bytes.
func Header(h http.Header, n int) {
	h["Content-Type"] = []string{"text/plain; charset=utf-8"}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	h["Cache-Control"] = []string{"no-store"}
	h["Content-Length"] = []string{strconv.Itoa(n)}
}

// Write answers status with body and returns status. Fields set on w
// before (Retry-After, Allow) go out too.
func Write(w http.ResponseWriter, status int, body string) int {
	Header(w.Header(), len(body))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
	return status
}
