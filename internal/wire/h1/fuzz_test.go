package h1

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"
)

// seen is what a handler saw of a request, to compare the two servers.
type seen struct {
	Method, RequestURI, URL, Host, Proto string
	Major, Minor                         int
	Header                               http.Header
	ContentLength                        int64
	Close                                bool
	Body                                 string
	BodyErr                              bool
}

func record(r *http.Request) seen {
	b, err := io.ReadAll(r.Body)
	return seen{r.Method, r.RequestURI, r.URL.String(), r.Host, r.Proto, r.ProtoMajor, r.ProtoMinor,
		r.Header, r.ContentLength, r.Close, string(b), err != nil}
}

// parseNative reads the first request of data as the native server does:
// ok false means it would hand the connection off.
func parseNative(data []byte) (seen, bool) {
	b := append([]byte(nil), data...)
	scanned := 0
	end := headEnd(b, 0, &scanned)
	if end <= 0 {
		return seen{}, false
	}
	buf := make([]byte, len(b))
	copy(buf, b)
	c := &conn{remote: "192.0.2.1:1234", buf: &buf, w: len(buf), nc: eofConn{}, watchOn: make(chan bool, 1)}
	x := &exchange{c: c}
	req, ok := x.parse(buf[:end])
	if !ok {
		return seen{}, false
	}
	c.r = end
	x.req = &req
	x.body.x = x
	return record(&req), true
}

// parseNativeAfterPost reads data as the native server reads what
// follows a POST on the same connection: what skipBlank skips first.
func parseNativeAfterPost(data []byte) (seen, bool) {
	r, _ := skipBlank(data, 0, maxBlank)
	return parseNative(data[r:])
}

// eofConn is a connection with nothing more to read.
type eofConn struct{ net.Conn }

func (eofConn) Read([]byte) (int, error)        { return 0, io.EOF }
func (eofConn) SetReadDeadline(time.Time) error { return nil }

// reference is net/http's server, fed one connection per input. With
// prime, each connection first carries that request (answered, not
// recorded), so that net/http reads the input as the request after it.
type reference struct {
	prime string
	once  sync.Once
	addr  string
	got   chan seen
}

var (
	ref          reference
	refAfterPost = reference{prime: "POST /prime HTTP/1.1\r\nHost: p\r\nContent-Length: 2\r\n\r\nab"}
)

// connRequests counts the requests of one connection.
type connRequests struct{}

func (rf *reference) read(t testing.TB, data []byte) (seen, bool) {
	rf.once.Do(func() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		rf.addr = ln.Addr().String()
		rf.got = make(chan seen, 1)
		srv := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n := r.Context().Value(connRequests{}).(*int); rf.prime != "" && *n == 0 {
					*n++ // the priming request: answered, and the input follows
					return
				}
				rf.got <- record(r)
				panic(http.ErrAbortHandler) // one request per input
			}),
			ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
				return context.WithValue(ctx, connRequests{}, new(int))
			},
			ErrorLog: log.New(io.Discard, "", 0),
		}
		go srv.Serve(ln)
	})
	nc, err := net.Dial("tcp", rf.addr)
	if err != nil {
		t.Fatal(err)
	}
	client := nc.(*net.TCPConn)
	defer client.Close()
	go func() {
		client.Write([]byte(rf.prime))
		client.Write(data)
		// Let the server see the end of the input, as the native reader
		// sees it in parseNative.
		client.CloseWrite()
	}()
	// The server either calls the handler or answers (an error) and
	// closes; drain what it writes so that it never blocks.
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, client); close(done) }()
	select {
	case s := <-rf.got:
		client.Close()
		<-done
		return s, true
	case <-done:
		select {
		case s := <-rf.got:
			return s, true
		default:
			return seen{}, false
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("reference server neither answered nor closed on %q", data)
		return seen{}, false
	}
}

// FuzzParseMatchesNetHTTP holds the native parser to its promise:
// whatever it accepts, net/http's server reads identically (method,
// target, host, header, framing, body); anything else it hands off. Each
// input is read twice: as a connection's first request, and as the
// request after a POST, where both skip the same empty lines.
func FuzzParseMatchesNetHTTP(f *testing.F) {
	for _, s := range slices.Concat(accepted, handedOff, afterPost) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if mine, ok := parseNative(data); ok {
			sameAsNetHTTP(t, &ref, data, mine)
		}
		if mine, ok := parseNativeAfterPost(data); ok {
			sameAsNetHTTP(t, &refAfterPost, data, mine)
		}
	})
}

// sameAsNetHTTP fails unless rf's server reads data as mine.
func sameAsNetHTTP(t *testing.T, rf *reference, data []byte, mine seen) {
	t.Helper()
	theirs, ok := rf.read(t, data)
	if !ok {
		t.Fatalf("native accepts what net/http refuses: %q (after %q)\nnative read %+v", data, rf.prime, mine)
	}
	if !reflect.DeepEqual(mine, theirs) {
		t.Fatalf("%q (after %q) read differently:\nnative   %+v\nnet/http %+v", data, rf.prime, mine, theirs)
	}
}

// afterPost are requests that follow a POST with the extra CRLF old
// clients send after its body (RFC 9112 2.2), and more.
var afterPost = []string{
	"\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
	"\r\n\r\nGET /two HTTP/1.1\r\nHost: x\r\n\r\n",
	"\n\nPOST /lf HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nz",
	"\r\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
	"\r\n\r\n\r\nGET /three HTTP/1.1\r\nHost: x\r\n\r\n", // more than net/http skips: handed off
}

func TestAfterPostShapesMatchNetHTTP(t *testing.T) {
	for i, s := range afterPost {
		mine, ok := parseNativeAfterPost([]byte(s))
		if ok != (i < len(afterPost)-1) {
			t.Errorf("native after a POST: %q read %v", s, ok)
		}
		if ok {
			sameAsNetHTTP(t, &refAfterPost, []byte(s), mine)
		}
	}
}

var accepted = []string{
	"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
	"GET /a/b?c=d&e HTTP/1.1\r\nhost: Example.COM:8080\r\nuser-agent: curl/8\r\naccept: */*\r\n\r\n",
	"POST /form HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello",
	"POST /short HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc",
	"GET / HTTP/1.0\r\n\r\n",
	"GET / HTTP/1.0\r\nConnection: keep-alive\r\nHost: h\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nx-a: 2\r\nX-B:   padded \t \r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nPragma: no-cache\r\n\r\n",
	"DELETE /item/%20x HTTP/1.1\r\nHost: [::1]:80\r\nCookie: a=b; c=d\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nX-Obs: caf\xc3\xa9\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
}

// handedOff are requests the native parser must never read itself:
// request-smuggling shapes and what net/http treats specially.
var handedOff = []string{
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", // CL.TE
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n", // TE.CL
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n",                              // TE.TE
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n",                              // space before colon
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",                // duplicate CL
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\n\r\nabc",                                  // listed CL
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc",                                    // signed CL
	"GET / HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n",                                         // obs-fold
	"GET / HTTP/1.1\nHost: x\n\n",                                                                    // bare LF
	"GET / HTTP/1.1\r\nHost: x\rX: y\r\n\r\n",                                                        // bare CR
	"GET / HTTP/1.1\r\n\r\n",                                                           // no Host
	"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",                                     // two Hosts
	"GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n",                                        // absolute form
	"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",                                            // asterisk form
	"CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n",                                    // CONNECT
	"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",                                                 // h2c preface
	"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",   // upgrade
	"POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx", // expect
	"\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",                                            // leading empty line
	"GET / HTTP/1.2\r\nHost: x\r\n\r\n",                                                // other version
	"GET  / HTTP/1.1\r\nHost: x\r\n\r\n",                                               // two spaces
	"GET / HTTP/1.1\r\nHost: x\r\nX\x00: y\r\n\r\n",                                    // NUL in name
	"GET / HTTP/1.1\r\nHost: x\r\nX: a\x01b\r\n\r\n",                                   // CTL in value
	"G@T / HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n", // non-token method
}

func TestSmugglingShapesAreHandedOff(t *testing.T) {
	for _, s := range handedOff {
		if got, ok := parseNative([]byte(s)); ok {
			t.Errorf("native read %q itself: %+v", s, got)
		}
	}
}

func TestAcceptedShapesMatchNetHTTP(t *testing.T) {
	for _, s := range accepted {
		mine, ok := parseNative([]byte(s))
		if !ok {
			t.Errorf("native hands off %q", s)
			continue
		}
		theirs, ok := ref.read(t, []byte(s))
		if !ok {
			t.Errorf("net/http refuses %q", s)
			continue
		}
		if !reflect.DeepEqual(mine, theirs) {
			t.Errorf("%q read differently:\nnative   %+v\nnet/http %+v", s, mine, theirs)
		}
	}
}
