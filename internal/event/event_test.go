package event

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestBusOrderRingAndLog(t *testing.T) {
	var logs bytes.Buffer
	b := NewBus(slog.New(slog.NewTextHandler(&logs, nil)), 3, nil)
	var got []uint64
	b.Subscribe(func(e Event) { got = append(got, e.Seq) })
	for i := 0; i < 5; i++ {
		b.Emit(Event{Type: HostEjected, Pool: "web", Host: "h", Message: "host ejected", Evidence: map[string]any{"n": i}})
	}
	if len(got) != 5 || got[0] != 1 || got[4] != 5 {
		t.Fatalf("subscriber saw %v", got)
	}
	r := b.Recent(10)
	if len(r) != 3 || r[0].Seq != 5 || r[2].Seq != 3 {
		t.Fatalf("recent: %+v", r)
	}
	if n := strings.Count(logs.String(), "host ejected"); n != 5 {
		t.Fatalf("%d log lines", n)
	}
	b2 := NewBus(nil, 10, nil)
	b2.Emit(Event{Type: PoolEmpty})
	b2.Emit(Event{Type: PoolRestored})
	if r := b2.Recent(0); len(r) != 2 || r[0].Type != PoolRestored {
		t.Fatalf("recent before full: %+v", r)
	}
}

func TestSubscribeWithHistoryReplaysInOrder(t *testing.T) {
	b := NewBus(nil, 3, nil)
	for i := 0; i < 5; i++ {
		b.Emit(Event{Type: HostDown})
	}
	var got []uint64
	b.SubscribeWithHistory(func(e Event) { got = append(got, e.Seq) })
	b.Emit(Event{Type: HostUp})
	if len(got) != 4 || got[0] != 3 || got[2] != 5 || got[3] != 6 {
		t.Fatalf("got %v, want [3 4 5 6]", got)
	}
}
