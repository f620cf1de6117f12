package ratelimit

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// What go-redis logs itself (here: the dial to a Redis that is down)
// arrives as structured records of sturdy's logger, not as plain lines on
// stderr. Not parallel: go-redis's logger is process-wide.
func TestRedisLinesGoThroughTheLogger(t *testing.T) {
	var buf testutil.SyncBuffer
	LogRedisTo(slog.New(slog.NewJSONHandler(&buf, nil)))
	t.Cleanup(func() { LogRedisTo(slog.New(slog.DiscardHandler)) })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	s := NewShared(&config.SharedLimits{Redis: dead}, nil)
	defer s.Close()
	if _, err := s.take(context.Background(), "z", false, "k", 1000, 1, 0); err == nil {
		t.Fatal("a Redis that is not there answered")
	}
	out := strings.TrimSpace(buf.String())
	if out == "" {
		t.Fatal("go-redis logged nothing about the failed dial")
	}
	for _, line := range strings.Split(out, "\n") {
		var rec struct{ Level, Msg, Component string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON record: %q", line)
		}
		if rec.Level != "WARN" || rec.Component != "go-redis" || !strings.Contains(rec.Msg, "dial") {
			t.Errorf("record %+v, want a warning of go-redis about the dial", rec)
		}
	}
}
