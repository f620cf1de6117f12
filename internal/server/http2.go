// x/net/http2 marks its server deprecated in favour of net/http's, which
// is the same code but serves only the connections net/http hands it:
// sturdy needs to hand it a connection of its own (h2conn).
//lint:file-ignore SA1019 the server of x/net/http2 is used on purpose, see above

package server

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"

	"github.com/sturdyproxy/sturdy/internal/wire/h2conn"
	"golang.org/x/net/http2"
)

// serveHTTP2 serves srv's HTTP/2 connections (h2 by ALPN, h2c with prior
// knowledge) with golang.org/x/net/http2's server instead of net/http's
// bundled copy of the same code: it serves any net.Conn handed to it, so
// each connection goes through h2conn, whose batched writes send a
// response's HEADERS, DATA and trailers (and the responses of streams
// answered together) in one write and one TLS record, where the server
// alone writes each frame the moment its queue runs empty; and whose
// buffered reads spare h2c two system calls per frame. Call it once srv's
// TLSConfig is set.
func serveHTTP2(srv *http.Server) error {
	h2 := new(http2.Server)
	if err := http2.ConfigureServer(srv, h2); err != nil {
		return err
	}
	srv.TLSNextProto[http2.NextProtoTLS] = func(hs *http.Server, c *tls.Conn, h http.Handler) {
		serveHTTP2Conn(h2, hs, h2conn.Wrap(c), h, false)
	}
	// net/http passes an h2c connection, its preface read, inside a
	// *tls.Conn that is none (see x/net/http2's ConfigureServer).
	srv.TLSNextProto[unencryptedHTTP2] = func(hs *http.Server, c *tls.Conn, h http.Handler) {
		nc, ok := c.NetConn().(interface{ UnencryptedNetConn() net.Conn })
		if !ok {
			hs.ErrorLog.Print("h2c: net/http handed over a connection sturdy cannot unwrap; closing it")
			return
		}
		serveHTTP2Conn(h2, hs, h2conn.Wrap(nc.UnencryptedNetConn()), h, true)
	}
	return nil
}

// unencryptedHTTP2 is net/http's TLSNextProto key for h2c connections.
const unencryptedHTTP2 = "unencrypted_http2"

// serveHTTP2Conn is x/net/http2's ConfigureServer's own hand-over, on c.
func serveHTTP2Conn(s *http2.Server, hs *http.Server, c net.Conn, h http.Handler, sawPreface bool) {
	var ctx context.Context
	if bc, ok := h.(interface{ BaseContext() context.Context }); ok {
		ctx = bc.BaseContext() // the connection's context, of ConnContext
	}
	s.ServeConn(c, &http2.ServeConnOpts{Context: ctx, Handler: h, BaseConfig: hs, SawClientPreface: sawPreface})
}
