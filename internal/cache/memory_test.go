package cache

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestMemoryBound stores far more than MaxBytes; the store's total weight
// stays within it and the overflow is counted as evictions.
func TestMemoryBound(t *testing.T) {
	const maxBytes = 256 << 10
	body := strings.Repeat("x", 8<<10)
	e := newEnv(t, respond(200, body, "Cache-Control", "max-age=600"),
		func(o *Options) { o.MaxBytes, o.MaxObjectBytes = maxBytes, 16<<10 })
	for i := range 300 {
		if a := e.get(fmt.Sprintf("/obj/%d", i)); !a.res.Stored {
			t.Fatalf("object %d not stored: %q", i, a.header.Get("Cache-Status"))
		}
		if i%50 == 49 {
			e.cache.store.c.CleanUp() // eviction is amortised; settle it before measuring
			if w := e.cache.Stats().Bytes; w > maxBytes {
				t.Fatalf("after %d objects: weight %d > %d", i+1, w, maxBytes)
			}
		}
	}
	s := e.cache.Stats()
	if s.Bytes == 0 || s.Objects > maxBytes/(8<<10) || s.Evictions < 250 {
		t.Errorf("stats: %d bytes, %d objects, %d evictions", s.Bytes, s.Objects, s.Evictions)
	}
}

// TestBigObjectStreamsThrough: a body larger than MaxObjectBytes reaches
// the client while the origin is still sending it (no whole-body buffer)
// and is not stored.
func TestBigObjectStreamsThrough(t *testing.T) {
	const chunk, chunks = 64 << 10, 64 // 4 MiB against a 64 KiB object limit
	firstSeen := make(chan struct{})
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=600")
		w.WriteHeader(200)
		for i := range chunks {
			w.Write(bytes.Repeat([]byte{byte('a' + i%26)}, chunk))
			w.(http.Flusher).Flush()
			if i == 0 {
				<-firstSeen // the rest waits until the client holds the first chunk
			}
		}
	}, func(o *Options) { o.MaxObjectBytes = chunk })

	resp, err := e.client.Get(e.front.URL + "/big")
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, chunk)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	close(firstSeen)
	rest, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || len(first)+len(rest) != chunk*chunks || rest[len(rest)-1] != byte('a'+(chunks-1)%26) {
		t.Fatalf("body: %d bytes, err %v", len(first)+len(rest), err)
	}
	if cs := resp.Header.Get("Cache-Status"); cs != "sturdy; fwd=uri-miss; fwd-status=200" {
		t.Errorf("Cache-Status %q", cs)
	}

	e.origin.set(respond(200, strings.Repeat("y", 2*chunk), "Cache-Control", "max-age=600",
		"Content-Length", strconv.Itoa(2*chunk)))
	e.get("/big").wantCacheStatus(t, "sturdy; fwd=uri-miss; fwd-status=200; detail=too-large")
	if n := e.origin.hits.Load(); n != 2 {
		t.Errorf("origin hits = %d, want 2", n)
	}
	if s := e.cache.Stats(); s.Routes["r"].Stored != 0 {
		t.Errorf("stored %d", s.Routes["r"].Stored)
	}
}

// TestUnknownLengthStored: a small chunked body is stored even though
// "stored" could not be promised in its header.
func TestUnknownLengthStored(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=60")
		io.WriteString(w, "part1 ")
		w.(http.Flusher).Flush()
		io.WriteString(w, "part2")
	})
	a := e.get("/chunked")
	a.want(t, 200, "part1 part2", StatusMiss)
	a.wantCacheStatus(t, "sturdy; fwd=uri-miss; fwd-status=200")
	if !a.res.Stored {
		t.Error("not stored")
	}
	a = e.get("/chunked")
	a.want(t, 200, "part1 part2", StatusHit)
	if a.header.Get("Content-Length") != strconv.Itoa(len("part1 part2")) {
		t.Errorf("Content-Length %q", a.header.Get("Content-Length"))
	}
}

// TestBrokenBodyAborts: an origin body that breaks after the header went
// out aborts the client's response (no silently truncated 200) and counts
// as an origin error.
func TestBrokenBodyAborts(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=60")
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, "only ten..")
		w.(http.Flusher).Flush() // the header leaves; then the body breaks
		panic(http.ErrAbortHandler)
	})
	resp, err := e.client.Get(e.front.URL + "/broken")
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Fatalf("client got a complete response: %d %v %+v", resp.StatusCode, resp.Header, e.cache.RouteStats("r"))
	}
	if s := e.cache.RouteStats("r"); s.OriginErrors != 1 || s.Stored != 0 {
		t.Errorf("stats %+v", s)
	}
}
