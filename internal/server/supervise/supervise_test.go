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

	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
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

func TestAFailingMemberIsRestartedAndTheOthersKeepRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs testutil.SyncBuffer
		g := New(slog.New(slog.NewTextHandler(&logs, nil)))
		g.Start(t.Context())
		var others atomic.Bool
		g.Go("steady", func(ctx context.Context) error {
			others.Store(true)
			<-ctx.Done()
			others.Store(false)
			return nil
		})
		var runs atomic.Int32
		g.Go("broken", func(ctx context.Context) error {
			if runs.Add(1) <= 3 {
				return errors.New("cannot create /var/lib/sturdy/acme")
			}
			<-ctx.Done()
			return nil
		})
		time.Sleep(time.Minute)
		synctest.Wait()
		if runs.Load() != 4 || g.Failures()["broken"] != 3 || !others.Load() {
			t.Fatalf("runs %d, failures %v, steady running %v", runs.Load(), g.Failures(), others.Load())
		}
		if !strings.Contains(logs.String(), "cannot create /var/lib/sturdy/acme") {
			t.Fatalf("the error was not logged:\n%s", logs.String())
		}
		if err := g.Stop(); err != nil || others.Load() {
			t.Fatalf("Stop: %v; steady still running: %v", err, others.Load())
		}
	})
}
