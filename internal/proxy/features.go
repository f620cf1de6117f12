package proxy

import (
	"net/http"
	"strconv"

	"github.com/sturdyproxy/sturdy/internal/access"
	"github.com/sturdyproxy/sturdy/internal/edge"
)

// admit runs the route's access controls. When it returns false the
// client has been answered (or went away while its request was delayed),
// and no backend is asked or charged.
func (f *forwarder) admit() bool {
	r, rt := f.r, f.rt
	ip, _ := edge.ClientIP(r, f.snap.Trusted)
	proto := "http"
	if f.h.TLS {
		proto = "https"
	}
	f.clientKey = clientKey(r, f.snap.ClientHeader, f.peerTrusted(), f.snap.Trusted)
	key := f.clientKey // the client's address, unless attribution keys by a header
	if f.snap.ClientHeader != "" {
		key = ip.String()
	}
	c := access.Client{IP: ip, Key: key, Attributed: rt.Monitor.Attributed(f.clientKey), Proto: proto}
	adm, status, ok := rt.Access.Admit(f.w, r, c, f.now)
	if !ok {
		f.status = status
		if rt.Agg != nil && status != 499 {
			// One line per route and status per interval, never per request.
			rt.Agg.Add("requests on route " + rt.Name + " refused by its access controls with " + strconv.Itoa(status))
		}
		if status == access.StatusClose {
			panic(http.ErrAbortHandler) // as answerFixed: nothing is sent
		}
		return false
	}
	f.admission, f.admitted = adm, true
	return true
}

// serveFile answers from the route's files; it reports false when the
// request goes on to the pool.
func (f *forwarder) serveFile() bool {
	sw := &statusWriter{ResponseWriter: f.w}
	if t := f.rt.SendTimeout; t > 0 && f.dl != nil {
		// A client that stops reading a file is cut as one that stops
		// reading a backend's answer.
		sw.send = clientSink{w: f.w, dl: f.dl, idle: idleDeadline{timeout: t}, conn: f.conn}
	}
	if !f.rt.Static.Serve(sw, f.r, f.r.URL.Path) {
		return false
	}
	f.status, f.bytes = sw.status, sw.bytes
	if sw.send.cut {
		// Cut: closed, not kept for another request (see stream).
		f.countFault(edge.FaultSendTimeout)
		f.status = 499
		panic(http.ErrAbortHandler)
	}
	return true
}
