// Package supervise owns the long-lived goroutines of a sturdy process.
// Every component that works in the background (the health monitor, the
// DNS refresher, the cache's sweeper, the log aggregator, the webhooks, the
// access log, the listeners) runs as one member of a Group, under one
// context and one wait.
//
// A panic in a member is recovered, logged with its stack, counted, and the
// member starts over after a pause; so does a member that returns an error
// before its context ends (the ACME manager when its storage directory
// cannot be created, say). A fault in one component must not stop the
// proxy, and must not pass unnoticed either.
package supervise

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// Restart pauses after a panic: the first restart waits minRestart, each
// further one twice as long, up to maxRestart.
const (
	minRestart = 100 * time.Millisecond
	maxRestart = 30 * time.Second
)

// Group runs members until its context ends. The zero value is not
// usable; call New.
type Group struct {
	log *slog.Logger

	mu       sync.Mutex // guards panics, failures, eg, ctx
	panics   map[string]uint64
	failures map[string]uint64
	eg       *errgroup.Group
	ctx      context.Context
	cancel   context.CancelFunc
}

// New returns a group that logs to log. Members may be added once Start
// has been called.
func New(log *slog.Logger) *Group {
	return &Group{log: log, panics: map[string]uint64{}, failures: map[string]uint64{}}
}

// Start opens the group under parent; Stop (or parent's end) ends it.
func (g *Group) Start(parent context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ctx, g.cancel = context.WithCancel(parent)
	g.eg, g.ctx = errgroup.WithContext(g.ctx)
}

// Go runs run(ctx) as a member named name until it returns nil or the
// group ends. A member that panics, or returns an error while the group
// runs, is logged, counted and restarted after a pause.
func (g *Group) Go(name string, run func(ctx context.Context) error) {
	g.mu.Lock()
	eg, ctx := g.eg, g.ctx
	g.mu.Unlock()
	if eg == nil {
		panic("supervise: Go before Start")
	}
	eg.Go(func() error { // never an error: members that fail are restarted
		pause := minRestart
		for {
			err, panicked := g.once(name, ctx, run)
			if !panicked && (err == nil || ctx.Err() != nil) {
				return nil
			}
			if !panicked {
				g.failed(name, err, pause)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(pause):
			}
			pause = min(pause*2, maxRestart)
		}
	})
}

func (g *Group) once(name string, ctx context.Context, run func(context.Context) error) (err error, panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			g.Recovered(name, v, debug.Stack())
			panicked = true
		}
	}()
	return run(ctx), false
}

// Recovered logs and counts a panic recovered in component name: the
// group's members, and goroutines that components run themselves (the
// monitor's probes), report here.
func (g *Group) Recovered(name string, v any, stack []byte) {
	g.mu.Lock()
	g.panics[name]++
	g.mu.Unlock()
	g.log.Error("recovered from a panic; the component starts over (this is a bug in sturdy: please report it with this stack)",
		"component", name, "panic", fmt.Sprint(v), "stack", string(stack))
}

// failed logs and counts a member that returned an error.
func (g *Group) failed(name string, err error, pause time.Duration) {
	g.mu.Lock()
	g.failures[name]++
	g.mu.Unlock()
	g.log.Error("a component stopped with an error; it starts over", "component", name, "err", err, "retry_in", pause.String())
}

// Failures returns how many times each component returned an error.
func (g *Group) Failures() map[string]uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.failures)
}

// Panics returns how many panics each component recovered from.
func (g *Group) Panics() map[string]uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.panics)
}

// Stop ends every member's context and waits for them.
func (g *Group) Stop() error {
	g.mu.Lock()
	eg, cancel := g.eg, g.cancel
	g.mu.Unlock()
	if eg == nil {
		return nil
	}
	cancel()
	return eg.Wait()
}
