package compress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// streamHandler writes parts, flushing after each, and writes the next
// only once the client says it has read the previous one: the test hangs
// (and fails at its deadline) unless each flush reached the client.
func streamHandler(ct string, parts []string, read <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ct)
		for _, part := range parts {
			io.WriteString(w, part)
			http.NewResponseController(w).Flush()
			select {
			case <-read:
			case <-r.Context().Done():
				return
			}
		}
	}
}

func streamParts() []string {
	parts := make([]string, 5)
	for i := range parts {
		parts[i] = fmt.Sprintf("data: event %d %s\n\n", i, strings.Repeat("x", 40))
	}
	return parts
}

func TestEventStreamPassesUncompressedAndFlushed(t *testing.T) {
	read := make(chan struct{})
	parts := streamParts()
	url := serve(t, testPolicy(t, nil), streamHandler("text/event-stream", parts, read))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Accept-Encoding", "gzip, zstd, br")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ce := resp.Header.Get("Content-Encoding"); ce != "" {
		t.Fatalf("event stream compressed with %s", ce)
	}
	br := bufio.NewReader(resp.Body)
	for i, want := range parts {
		got := make([]byte, len(want))
		if _, err := io.ReadFull(br, got); err != nil {
			t.Fatalf("event %d did not arrive: %v", i, err)
		}
		if string(got) != want {
			t.Fatalf("event %d: %q", i, got)
		}
		read <- struct{}{}
	}
}

func TestStreamedResponseIsCompressedAndEachFlushArrives(t *testing.T) {
	for _, enc := range []string{"gzip", "zstd", "br"} {
		t.Run(enc, func(t *testing.T) {
			read := make(chan struct{})
			parts := streamParts()
			url := serve(t, testPolicy(t, nil), streamHandler("application/x-ndjson", parts, read))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
			req.Header.Set("Accept-Encoding", enc)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if ce := resp.Header.Get("Content-Encoding"); ce != enc {
				t.Fatalf("Content-Encoding %q, want %s", ce, enc)
			}
			dec := decoder(t, enc, resp.Body)
			for i, want := range parts {
				got := make([]byte, len(want))
				if _, err := io.ReadFull(dec, got); err != nil {
					t.Fatalf("part %d did not arrive decoded: %v", i, err)
				}
				if string(got) != want {
					t.Fatalf("part %d: %q", i, got)
				}
				read <- struct{}{}
			}
			if rest, err := io.ReadAll(dec); err != nil || len(rest) != 0 {
				t.Errorf("after the parts: %d bytes, %v", len(rest), err)
			}
		})
	}
}
