package supervise

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testutil"
)

func TestAPanickingMemberIsLoggedCountedAndRestarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs testutil.SyncBuffer
		g := New(slog.New(slog.NewTextHandler(&logs, nil)))
		g.Start(t.Context())
		var runs atomic.Int32
		g.Go("flaky", func(ctx context.Context) error {
			if runs.Add(1) <= 2 {
				panic("boom")
			}
			<-ctx.Done()
			return nil
		})
		time.Sleep(time.Second)
		synctest.Wait()
		if runs.Load() != 3 {
			t.Fatalf("%d runs, want 3 (two panics, then a clean run)", runs.Load())
		}
		if n := g.Panics()["flaky"]; n != 2 {
			t.Fatalf("%d panics counted, want 2", n)
		}
		if !strings.Contains(logs.String(), "boom") || !strings.Contains(logs.String(), "supervise_test.go") {
			t.Fatalf("log lacks the panic or its stack:\n%s", logs.String())
		}
		if err := g.Stop(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestAMemberErrorEndsTheGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(slog.New(slog.DiscardHandler))
		g.Start(t.Context())
		stopped := make(chan struct{})
		g.Go("waiter", func(ctx context.Context) error {
			<-ctx.Done()
			close(stopped)
			return nil
		})
		g.Go("broken", func(context.Context) error { return errors.New("cannot bind") })
		<-stopped
		if err := g.Stop(); err == nil || !strings.Contains(err.Error(), "broken: cannot bind") {
			t.Fatalf("Stop = %v, want the member's error with its name", err)
		}
	})
}
