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
	// Close answers nothing (routes[].respond.close): the front end closes
	// the connection, or resets the stream of HTTP/2 and HTTP/3.
	Close bool
	// contentType and length are the header values, shared by every
	// answer (the writer copies nothing).
	contentType, length []string
}

// NewRespond builds a fixed answer.
func NewRespond(status int, contentType string, body []byte) *Respond {
	return &Respond{Status: status, Body: body, contentType: []string{contentType}, length: []string{strconv.Itoa(len(body))}}
}

// NewClose builds the answer that is none: the connection closed.
func NewClose() *Respond { return &Respond{Close: true} }

// closedStatus is what the access log shows for a request answered by
// closing: nginx's 444, which no client ever sees.
const closedStatus = 444

// answerFixed writes the route's fixed answer; HEAD gets the headers only.
func (f *forwarder) answerFixed(rs *Respond) int {
	if rs.Close {
		// Both front ends (the native HTTP/1 one and net/http's HTTP/2)
		// take ErrAbortHandler as "send nothing": the connection closed
		// with nothing written, or the stream reset.
		f.status = closedStatus
		panic(http.ErrAbortHandler)
	}
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
