package proxy

import (
	"net/http"
	"strconv"

	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/wire/plain"
)

// Error bodies are short plain text for people: they name the route and the
// failure class and never an internal address.

func writeText(w http.ResponseWriter, status int, body string) int {
	if id := requestIDOf(w); id != "" {
		body += "request id: " + id + "\n"
	}
	if asGRPC(w) != nil {
		return writeGRPCStatus(w, status, grpcCodeFor(status), body)
	}
	return plain.Write(w, status, body)
}

func writeNoRoute(w http.ResponseWriter) int {
	return writeText(w, http.StatusNotFound, "404 Not Found: no route matches this host and path, and no default route is configured.\n")
}

// writeEdgeError answers with status and a sentence about the route: for
// decisions at the edge and for upstream failures alike.
func writeEdgeError(w http.ResponseWriter, status int, route, why string) int {
	return writeText(w, status, strconv.Itoa(status)+" "+http.StatusText(status)+": route "+strconv.Quote(route)+": "+why+".\n")
}

// statusFor is the status a client gets when the last attempt failed with c.
func statusFor(c outcome.Class) int {
	switch c {
	case outcome.ConnectTimeout, outcome.ResponseTimeout:
		return http.StatusGatewayTimeout
	case outcome.ClientCancel:
		return 499
	}
	return http.StatusBadGateway
}

var explain = map[outcome.Class]string{
	outcome.ConnectRefused:    "the backend refused the connection",
	outcome.ConnectTimeout:    "connecting to the backend timed out",
	outcome.ConnectError:      "the backend could not be reached",
	outcome.DNSError:          "the backend's name did not resolve",
	outcome.TLSError:          "the TLS handshake with the backend failed",
	outcome.Reset:             "the backend reset the connection",
	outcome.EOFBeforeResponse: "the backend closed the connection without answering",
	outcome.ResponseTimeout:   "the backend did not answer in time",
	outcome.BadResponse:       "the backend's answer could not be parsed",
	outcome.StreamRefused:     "the backend refused the request before processing it (HTTP/2 GOAWAY or REFUSED_STREAM)",
}

func writeUpstreamError(w http.ResponseWriter, route string, c outcome.Class) int {
	return writeEdgeError(w, statusFor(c), route, "no usable answer from the backends ("+c.String()+": "+explain[c]+")")
}

// writeRequestFailed answers a request that failed the same way on two
// backends: the request is the likely cause, and no backend is charged.
func writeRequestFailed(w http.ResponseWriter, route string, c outcome.Class) int {
	return writeEdgeError(w, statusFor(c), route, "this request failed the same way on two backends ("+c.String()+": "+explain[c]+"); it was not retried further and no backend was marked down")
}

// writeRequestFailedAgain answers a request that failed the same way
// each time it was sent lately, on backends that served others in
// between (one backend, when its peers are out): the request is the
// likely cause, and no backend is charged.
func writeRequestFailedAgain(w http.ResponseWriter, route string, c outcome.Class) int {
	return writeEdgeError(w, statusFor(c), route, "this request failed the same way each time it was sent lately ("+c.String()+": "+explain[c]+"), on backends that served other requests in between; no backend was marked down")
}

// writeRouteFailed answers a request of a route whose requests fail the
// same way on every backend: the route's failure, charged to no backend.
func writeRouteFailed(w http.ResponseWriter, route string, c outcome.Class) int {
	return writeEdgeError(w, statusFor(c), route, "this route's requests are failing the same way on every backend they reach ("+c.String()+": "+explain[c]+"); it was not retried further and no backend was marked down")
}

// writeBusy refuses a request at once because a limit is full: the proxy's
// decision, charged to no backend.
func writeBusy(w http.ResponseWriter, route, why string) int {
	w.Header()["Retry-After"] = []string{"1"}
	return writeEdgeError(w, http.StatusServiceUnavailable, route, why+"; try again in a moment")
}

// writeShedClient refuses a client whose own failures were attributed to it.
func writeShedClient(w http.ResponseWriter, route string) int {
	w.Header()["Retry-After"] = []string{"30"}
	return writeEdgeError(w, http.StatusTooManyRequests, route, "requests from this client keep failing on every backend and are refused for a while")
}
