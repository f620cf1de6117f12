package framing

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
)

const get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"

// verdicts are what Check and BodyError say for each request of a
// connection that carried the bytes in, split every way.
var framingCases = []struct {
	name string
	in   string
	want []string // per request: "ok", "ambiguous", "unfollowed", "body"
}{
	{"keep-alive gets", get + get + get, []string{"ok", "ok", "ok"}},
	{"fixed body then get", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello" + get, []string{"ok", "ok"}},
	{"fixed body that looks like a request", "POST / HTTP/1.1\r\nContent-Length: 27\r\n\r\n" + get + get, []string{"ok", "ok"}},
	{"chunked then get", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\nX-T: 1\r\n\r\n" + get, []string{"ok", "ok"}},
	{"chunked upper case", "POST / HTTP/1.1\r\nTransfer-Encoding: CHUNKED\r\n\r\n0\r\n\r\n" + get, []string{"ok", "ok"}},
	{"bare LF head", "GET / HTTP/1.1\nHost: x\n\n" + get, []string{"ok", "ok"}},
	{"equal duplicate lengths", "POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi" + get, []string{"ok", "ok"}},
	{"long cookie", "GET / HTTP/1.1\r\nCookie: " + strings.Repeat("c", 5000) + "\r\n\r\n" + get, []string{"ok", "ok"}},

	{"CL.TE", "POST / HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + get, []string{"ambiguous", "ambiguous"}},
	{"TE.CL", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 30\r\n\r\n0\r\n\r\n", []string{"ambiguous"}},
	{"CL.TE after a good one", get + "POST / HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + get, []string{"ok", "ambiguous", "ambiguous"}},
	{"differing lengths", "POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 20\r\n\r\nhi", []string{"ambiguous"}},
	{"length with sign", "POST / HTTP/1.1\r\nContent-Length: +2\r\n\r\nhi", []string{"ambiguous"}},
	{"folded transfer-encoding", "POST / HTTP/1.1\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n", []string{"ambiguous"}},
	{"folded content-length", "POST / HTTP/1.1\r\nContent-Length: 1\r\n\t0\r\n\r\n0123456789", []string{"ambiguous"}},
	{"te gzip chunked", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", []string{"ambiguous"}},
	{"two te fields", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", []string{"ambiguous"}},
	{"te on http/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\nabc", []string{"ambiguous"}},
	{"space before colon", "POST / HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n", []string{"ambiguous"}},

	{"chunk ext control byte", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;a=\x01\r\nabc\r\n0\r\n\r\n" + get, []string{"body", "ambiguous"}},
	{"chunk size space junk", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3 x\r\nabc\r\n0\r\n\r\n", []string{"body"}},
	{"chunk bare LF", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n", []string{"body"}},
	{"chunk data too long", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcdef\r\n0\r\n\r\n", []string{"body"}},
	{"chunk size 0x", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nabcde\r\n0\r\n\r\n", []string{"body"}},
	{"chunk size huge", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + strings.Repeat("f", 17) + "\r\n", []string{"body"}},
	{"trailer control byte", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: a\x01b\r\n\r\n" + get, []string{"body", "ambiguous"}},

	{"upgrade not taken", "GET /ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n" + get, []string{"ok", "unfollowed"}},
}

func TestFraming(t *testing.T) {
	for _, c := range framingCases {
		// One read, one byte at a time, and in three pieces: the parser
		// must not care where reads end.
		for _, split := range []int{len(c.in), 1, len(c.in)/3 + 1} {
			fc := Wrap(nil)
			for b := c.in; len(b) > 0; {
				k := min(split, len(b))
				fc.p.feed([]byte(b[:k]))
				b = b[k:]
			}
			for i, want := range c.want {
				v, why := fc.Check()
				got := [...]string{OK: "ok", Ambiguous: "ambiguous", Unfollowed: "unfollowed"}[v]
				if got == "ok" && fc.BodyError() != "" {
					got = "body"
				}
				if got != want {
					t.Errorf("%s (reads of %d): request %d: %s (%s), want %s", c.name, split, i, got, why, want)
				}
			}
		}
	}
}

// The wrapper passes every byte through unchanged.
func TestConnReadsThrough(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	fc := Wrap(b)
	go a.Write([]byte(get))
	buf := make([]byte, len(get))
	n, err := fc.Read(buf)
	if err != nil || string(buf[:n]) != get[:n] {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
}

func BenchmarkFollowGet(b *testing.B) {
	req := []byte("GET /api/v1/users/42?include=profile HTTP/1.1\r\nHost: api.example.com\r\nUser-Agent: bench/1.0\r\nAccept: application/json\r\nAccept-Encoding: gzip\r\nCookie: session=0123456789abcdef0123456789abcdef\r\n\r\n")
	fc := Wrap(nil)
	b.SetBytes(int64(len(req)))
	b.ReportAllocs()
	for b.Loop() {
		fc.p.feed(req)
	}
}

// After a malformed chunked body the connection's reads fail at once
// (net/http would otherwise wait for bytes that may never come); an
// HTTP/2 connection (h2c, prior knowledge) is not followed at all, so
// that bytes in its frames that look like HTTP/1 never trip it.
func TestReadsAfterAFault(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
		fail bool
	}{
		{"malformed chunk", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", true},
		{"h2c preface then HTTP/1 look-alikes", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x10\x00POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", false},
	} {
		a, b := net.Pipe()
		fc := Wrap(b)
		go func() { a.Write([]byte(c.in)); a.Write([]byte("more")) }()
		buf := make([]byte, len(c.in))
		if _, err := io.ReadFull(fc, buf); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_, err := fc.Read(buf)
		if c.fail != errors.Is(err, ErrMalformedBody) {
			t.Errorf("%s: the next read: %v", c.name, err)
		}
		a.Close()
		b.Close()
	}
}

// Where reads end must never change what the parser finds: the bytes fed
// in one read and one byte at a time leave it in the same state.
func FuzzFeedSplits(f *testing.F) {
	for _, c := range framingCases {
		f.Add(c.in, 7)
	}
	f.Fuzz(func(t *testing.T, in string, split int) {
		step := 1 + int(uint(split)%64)
		state := func(step int) [5]int64 {
			fc := Wrap(nil)
			for b := []byte(in); len(b) > 0; {
				k := min(step, len(b))
				fc.p.feed(b[:k])
				b = b[k:]
			}
			return [5]int64{fc.bad.Load(), fc.body.Load(), fc.blind.Load(), fc.p.req, int64(fc.p.st)}
		}
		whole, bytewise, pieces := state(len(in)+1), state(1), state(step)
		if whole != bytewise || whole != pieces {
			t.Fatalf("bad, body, blind, request, state: %v in one read, %v byte by byte, %v in reads of %d", whole, bytewise, pieces, step)
		}
	})
}
