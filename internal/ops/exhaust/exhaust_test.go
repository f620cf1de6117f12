package exhaust

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
)

type keys []string

func (k *keys) Add(key string) { *k = append(*k, key) }

type emitted []event.Event

func (e *emitted) Emit(ev event.Event) { *e = append(*e, ev) }

// An episode opens at the first check after a failure, stays open while
// failures keep coming, and closes once none came for the hold time;
// readiness fails exactly while a failure is recent. Time is a fake
// clock.
func TestEpisode(t *testing.T) {
	now := time.Unix(1000, 0)
	var agg keys
	var bus emitted
	tr := New(Options{Agg: &agg, Bus: &bus, Hold: 10 * time.Second, Now: func() time.Time { return now }})
	if tr.NotReady(now) != "" {
		t.Fatal("not ready before any failure")
	}
	emfile := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", syscall.EMFILE)}
	tr.UpstreamFailed(emfile)
	tr.UpstreamFailed(fmt.Errorf("upstream 127.0.0.1:1: connect: %w", emfile))
	if !tr.AcceptFailed(&net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.ENFILE)}) {
		t.Error("ENFILE on accept is not local exhaustion")
	}
	if tr.AcceptFailed(&net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.ECONNABORTED)}) {
		t.Error("ECONNABORTED on accept is the client's, not exhaustion")
	}
	tr.UpstreamFailed(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.EADDRNOTAVAIL)})
	if got := tr.Counts(); got["upstream"]["file_descriptors"] != 2 || got["accept"]["file_descriptors"] != 1 || got["upstream"]["local_ports"] != 1 {
		t.Errorf("counts %v", got)
	}
	if len(agg) != 4 || !strings.Contains(agg[0], "sturdy ran out of file descriptors") || !strings.Contains(agg[0], "no backend was charged") {
		t.Errorf("aggregated keys %q", agg)
	}
	r := tr.NotReady(now)
	if !strings.Contains(r, "upstream file_descriptors: 2") || !strings.Contains(r, "LimitNOFILE") {
		t.Errorf("readiness reason %q", r)
	}
	tr.Check()
	if on, since := tr.Active(); !on || !since.Equal(now) || len(bus) != 1 || bus[0].Type != event.ResourceExhausted {
		t.Fatalf("after the first check: active %v since %v, events %v", on, since, bus)
	}
	if bus[0].Evidence["upstream_file_descriptors"] != uint64(2) {
		t.Errorf("evidence %v", bus[0].Evidence)
	}
	now = now.Add(5 * time.Second)
	tr.UpstreamFailed(emfile)
	tr.Check()
	now = now.Add(9 * time.Second)
	tr.Check()
	if on, _ := tr.Active(); !on || len(bus) != 1 || tr.NotReady(now) == "" {
		t.Fatalf("9s after the last failure: active %v, events %v, reason %q", on, bus, tr.NotReady(now))
	}
	now = now.Add(2 * time.Second)
	tr.Check()
	if on, _ := tr.Active(); on || len(bus) != 2 || bus[1].Type != event.ResourceRecovered || tr.NotReady(now) != "" {
		t.Fatalf("11s after the last failure: active %v, events %v", on, bus)
	}
	if d := bus[1].Evidence["episode_seconds"]; d != 5.0 {
		t.Errorf("episode_seconds %v, want 5", d)
	}
	tr.Check()
	if len(bus) != 2 {
		t.Errorf("a quiet check announced again: %v", bus)
	}
}

// Errors that are not sturdy's own limits are not counted.
func TestOthersAreNotExhaustion(t *testing.T) {
	tr := New(Options{})
	for _, err := range []error{
		errors.New("connection refused"),
		&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)},
		&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)},
	} {
		if tr.AcceptFailed(err) {
			t.Errorf("%v counted as exhaustion", err)
		}
	}
	if tr.NotReady(time.Now()) != "" {
		t.Error("not ready without exhaustion")
	}
}
