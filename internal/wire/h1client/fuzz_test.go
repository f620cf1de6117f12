package h1client

import (
	"bufio"
	"bytes"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// seeds are realistic responses, and near misses, for FuzzParse.
var seeds = []string{
	"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello",
	"HTTP/1.1 200 OK\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nServer: nginx\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n5\r\nhello\r\n6;ext=\"q\"\r\n world\r\n0\r\nX-Sum: 11\r\n\r\n",
	"HTTP/1.1 200 OK\r\ntransfer-encoding: CHUNKED\r\n\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n",
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\nHTTP/1.1 201 Created\r\nLocation: /x\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<html></html>",
	"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\nabc",
	"HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\nEtag: \"x\"\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 404 \r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nno!",
	"HTTP/1.1 500\r\nConnection: close\r\n\r\noops",
	"HTTP/1.1 302 Found\r\nLocation: /a\r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\nPragma: no-cache\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
	"HTTP/1.1 200 OK\r\nX-A: a\r\n folded\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\nX-T: 2\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n03 \r\nabc\r\n0\r\n\r\n",
	"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length:  007 \t\r\n\r\n1234567",
	"HTTP/1.1 200 \xff\xfe\r\nX-Obs: \xe2\x82\xac\r\nContent-Length: 1\r\n\r\n!",
}

// FuzzParse is a differential test of the response parser against
// http.ReadResponse (with 1xx skipped as http.Transport skips them). Ours
// must never panic, and whenever it accepts a response, net/http must
// accept it too with the same status, header, framing, body bytes and
// trailers, and leave the same bytes unread: stricter is fine, looser
// never is.
func FuzzParse(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s), false, uint8(255))
		f.Add([]byte(s), true, uint8(3))
	}
	f.Fuzz(differential)
}

// differential checks one input of FuzzParse.
func differential(t *testing.T, data []byte, isHead bool, bufSize uint8) {
	method := "GET"
	if isHead {
		method = "HEAD"
	}
	// Our buffer: 16 to 4096 bytes, to reach the long-line paths; never
	// larger than net/http's, whose trailer limit is its buffer size.
	ourBR := bufio.NewReaderSize(bytes.NewReader(data), 16+16*int(bufSize))
	var h head
	var r response
	if err := readResponse(ourBR, &h, method, &r); err != nil {
		return
	}
	ours := &r.Response
	announced := maps.Clone(ours.Trailer)
	ourBody, ourErr := io.ReadAll(&r.body)

	theirBR := bufio.NewReader(bytes.NewReader(data))
	req := &http.Request{Method: method}
	var theirs *http.Response
	for {
		var err error
		theirs, err = http.ReadResponse(theirBR, req)
		if err != nil {
			t.Fatalf("we accepted what net/http refuses (%v):\n%q", err, data)
		}
		if theirs.StatusCode < 100 || theirs.StatusCode > 199 || theirs.StatusCode == 101 {
			break
		}
	}
	if ours.StatusCode != theirs.StatusCode || ours.Status != theirs.Status ||
		ours.ProtoMajor != theirs.ProtoMajor || ours.ProtoMinor != theirs.ProtoMinor {
		t.Fatalf("status: ours %q %d.%d, net/http %q %d.%d\n%q", ours.Status, ours.ProtoMajor, ours.ProtoMinor,
			theirs.Status, theirs.ProtoMajor, theirs.ProtoMinor, data)
	}
	ourHdr := maps.Clone(ours.Header)
	if hp, ok := ourHdr["Pragma"]; ok && len(hp) > 0 && hp[0] == "no-cache" && ourHdr["Cache-Control"] == nil {
		ourHdr["Cache-Control"] = []string{"no-cache"} // net/http adds this
	}
	if !reflect.DeepEqual(ourHdr, theirs.Header) {
		t.Fatalf("header:\nours    %q\nnet/http %q\n%q", ourHdr, theirs.Header, data)
	}
	if ours.ContentLength != theirs.ContentLength || !slices.Equal(ours.TransferEncoding, theirs.TransferEncoding) {
		t.Fatalf("framing: ours %d %q, net/http %d %q\n%q", ours.ContentLength, ours.TransferEncoding,
			theirs.ContentLength, theirs.TransferEncoding, data)
	}
	if theirs.Close && !ours.Close {
		t.Fatalf("net/http closes the connection after this response, we would not\n%q", data)
	}
	if !reflect.DeepEqual(announced, theirs.Trailer) {
		t.Fatalf("announced trailers: ours %q, net/http %q\n%q", announced, theirs.Trailer, data)
	}
	if ourErr != nil {
		return // we refused the body: stricter is fine
	}
	theirBody, err := io.ReadAll(theirs.Body)
	if err != nil {
		t.Fatalf("we accepted a body net/http refuses (%v)\n%q", err, data)
	}
	if !bytes.Equal(ourBody, theirBody) {
		t.Fatalf("body: ours %q, net/http %q\n%q", ourBody, theirBody, data)
	}
	if !reflect.DeepEqual(ours.Trailer, theirs.Trailer) {
		t.Fatalf("trailers: ours %q, net/http %q\n%q", ours.Trailer, theirs.Trailer, data)
	}
	// Where the next response would start: the smuggling question.
	ourRest, _ := io.ReadAll(ourBR)
	theirRest, _ := io.ReadAll(theirBR)
	if !bytes.Equal(ourRest, theirRest) {
		t.Fatalf("left unread: ours %q, net/http %q\n%q", ourRest, theirRest, data)
	}
}

// TestDifferentialGrammar runs the FuzzParse check over responses built
// from the pieces that matter for framing, which random bytes rarely hit
// together: the length and coding fields in their many spellings, line
// endings, chunk formats, and a second response after the first.
func TestDifferentialGrammar(t *testing.T) {
	statuses := []string{"HTTP/1.1 200 OK", "HTTP/1.0 200 OK", "HTTP/1.1 204 No Content", "HTTP/1.1 304 Not Modified",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK", "HTTP/1.1 404", "HTTP/1.1 200 ", "HTTP/1.1 101 Switching Protocols"}
	fields := []string{"Content-Length: 3", "Content-Length: 5", "content-length:3", "Content-Length: 03", "Content-Length: 3 ",
		"Content-Length:\t3", "Content-Length: 3, 3", "Content-Length: ", "Content-Length: +3", "Transfer-Encoding: chunked",
		"transfer-encoding: Chunked", "Transfer-Encoding: chunked, identity", "Transfer-Encoding: identity",
		"Transfer-Encoding : chunked", "Transfer-Encoding:chunked ", "Connection: close", "Connection: keep-alive",
		"Connection: x, Close", "Trailer: X-T", "Trailer: Content-Length", "X-A: b", " X-Fold: c", "X-Sp ace: d", "X-Empty:",
		"Pragma: no-cache", "X-Nul: a\x00b", "X-Obs: \xe2\x82\xac"}
	bodies := []string{"abc", "3\r\nabc\r\n0\r\n\r\n", "3\r\nabc\r\n0\r\nX-T: v\r\n\r\n", "3;x=y\r\nabc\r\n0\r\n\r\n",
		"0003\r\nabc\r\n0\r\n\r\n", "3 \r\nabc\r\n0\r\n\r\n", "abcde", "", "3\r\nabcX\r\n0\r\n\r\n", "3\nabc\n0\n\n",
		"3\r\nabc\r\n0\r\nContent-Length: 9\r\n\r\n", "3\r\nabc\r\n0\r\n"}
	tails := []string{"", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "GET / HTTP/1.1\r\n\r\n"}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	accepted := 0
	for range 30000 {
		eol := "\r\n"
		if rng.IntN(20) == 0 {
			eol = "\n"
		}
		var b strings.Builder
		b.WriteString(pick(statuses) + eol)
		for range rng.IntN(5) {
			b.WriteString(pick(fields) + eol)
		}
		b.WriteString(eol + pick(bodies) + pick(tails))
		data := []byte(b.String())
		isHead := rng.IntN(8) == 0
		differential(t, data, isHead, 255)
		var h head
		var r response
		if readResponse(bufio.NewReader(bytes.NewReader(data)), &h, "GET", &r) == nil {
			accepted++
		}
	}
	if accepted < 1000 {
		t.Errorf("only %d of the generated responses were accepted: the check proves little", accepted)
	}
}

// TestSeedsAccepted keeps the realistic seeds parseable: a parser that
// refused everything would pass FuzzParse.
func TestSeedsAccepted(t *testing.T) {
	for _, s := range seeds[:12] {
		var h head
		var r response
		if err := readResponse(bufio.NewReader(bytes.NewReader([]byte(s))), &h, "GET", &r); err != nil {
			t.Errorf("%q: %v", s, err)
			continue
		}
		if _, err := io.ReadAll(&r.body); err != nil {
			t.Errorf("%q: body: %v", s, err)
		}
	}
}
