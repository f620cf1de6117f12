package proxy

import (
	"net/http"
	"strconv"
)

// Respond is a route's fixed answer (routes[].respond), built once at
// compile time so that answering costs no allocation.
type Respond struct {
	Status int
	Body   []byte
	// contentType and length are the header values, shared by every
	// answer (the writer copies nothing).
	contentType, length []string
}

// NewRespond builds a fixed answer.
func NewRespond(status int, contentType string, body []byte) *Respond {
	return &Respond{Status: status, Body: body, contentType: []string{contentType}, length: []string{strconv.Itoa(len(body))}}
}

// answerFixed writes the route's fixed answer; HEAD gets the headers only.
func (f *forwarder) answerFixed(rs *Respond) int {
	h := f.w.Header()
	if rs.Status != http.StatusNoContent && rs.Status != http.StatusNotModified {
		h["Content-Type"] = rs.contentType
		h["Content-Length"] = rs.length
	}
	f.w.WriteHeader(rs.Status)
	if f.r.Method != http.MethodHead && len(rs.Body) > 0 {
		n, _ := f.w.Write(rs.Body)
		f.bytes = int64(n)
	}
	return rs.Status
}
