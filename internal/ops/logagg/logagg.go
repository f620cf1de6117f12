// Package logagg turns conditions that repeat per request into one log line
// per condition per interval ("512 requests from route site answered by
// sorry page in the last 10s"). In incident 001 a failing pool wrote a line
// per request, 1.5 GB an hour, and hid the one line that mattered; here the
// request path only bumps a counter, and a flusher goroutine writes what
// the counters add up to.
package logagg

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for Options.
const (
	DefaultInterval = 10 * time.Second
	DefaultMaxKeys  = 1000
)

// OverflowKey collects the counts of keys added after MaxKeys distinct keys
// were already being counted, so that a key built from client input cannot
// grow memory without bound.
const OverflowKey = "other repeated conditions (too many distinct ones to list)"

// idleFlushes is how many flushes in a row a key may count nothing before
// it is forgotten; a condition that comes back simply starts a new key.
const idleFlushes = 3

// dead marks an entry the flusher has retired. Adds to it land far below
// zero, which tells the adder to start a fresh entry.
const dead = math.MinInt64 / 2

// Options configure an Aggregator. The zero value is usable.
type Options struct {
	// Interval is how often counts are written. Default 10s.
	Interval time.Duration
	// MaxKeys bounds the distinct keys counted at once. Default 1000.
	MaxKeys int
	// Level is the level of the summary lines. Default slog.LevelWarn:
	// every condition worth aggregating is something going wrong.
	Level *slog.Level
	// Now is the clock used to measure each line's window. Default time.Now.
	Now func() time.Time
}

// Aggregator counts conditions by key and writes one line per key that
// occurred, per interval. Add is safe for concurrent use and cheap: for a
// key already seen it is a lock-free map load and one atomic add.
type Aggregator struct {
	log      *slog.Logger
	interval time.Duration
	maxKeys  int64
	level    slog.Level
	now      func() time.Time

	keys  sync.Map     // string -> *entry
	count atomic.Int64 // live entries in keys

	flushMu   sync.Mutex // serialises Flush; guards lastFlush and entry.idle
	lastFlush time.Time
}

type entry struct {
	n    atomic.Int64 // occurrences since the last flush, or below zero once retired
	idle int          // flushes in a row with nothing counted; guarded by Aggregator.flushMu
}

// New returns an aggregator writing to log. Run flushes it periodically;
// without Run, call Flush.
func New(log *slog.Logger, o Options) *Aggregator {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	level := slog.LevelWarn
	if o.Level != nil {
		level = *o.Level
	}
	return &Aggregator{
		log: log, interval: o.Interval, maxKeys: int64(o.MaxKeys), level: level, now: o.Now,
		lastFlush: o.Now(),
	}
}

// Add counts one occurrence of the condition key. The key is the line's
// text after the count, e.g. "requests from route site answered by sorry
// page"; the line reads "N <key> in the last 10s". Keep keys to names from
// the config and fixed words: never a client address or a URL.
func (a *Aggregator) Add(key string) { a.AddN(key, 1) }

// AddN counts n occurrences of key.
func (a *Aggregator) AddN(key string, n int64) {
	if n <= 0 {
		return
	}
	for {
		v, ok := a.keys.Load(key)
		if !ok {
			if key != OverflowKey && a.count.Load() >= a.maxKeys {
				key = OverflowKey
				continue
			}
			var loaded bool
			if v, loaded = a.keys.LoadOrStore(key, &entry{}); !loaded {
				a.count.Add(1)
			}
		}
		e := v.(*entry)
		if e.n.Add(n) >= 0 {
			return
		}
		// The flusher retired this entry between our load and add; the
		// add went nowhere. Replace the entry and count again.
		a.keys.CompareAndDelete(key, e)
	}
}

// Flush writes one line for every key counted since the last flush, in key
// order, and resets the counts.
func (a *Aggregator) Flush() {
	a.flushMu.Lock()
	defer a.flushMu.Unlock()
	now := a.now()
	window := now.Sub(a.lastFlush).Round(time.Second)
	if window < time.Second {
		window = time.Second
	}
	a.lastFlush = now
	type line struct {
		key string
		n   int64
	}
	var lines []line
	a.keys.Range(func(k, v any) bool {
		e := v.(*entry)
		if n := e.n.Swap(0); n > 0 {
			e.idle = 0
			lines = append(lines, line{k.(string), n})
			return true
		}
		e.idle++
		if e.idle >= idleFlushes && e.n.CompareAndSwap(0, dead) {
			a.keys.CompareAndDelete(k, e)
			a.count.Add(-1)
		}
		return true
	})
	slices.SortFunc(lines, func(x, y line) int { return cmp.Compare(x.key, y.key) })
	for _, l := range lines {
		a.log.Log(context.Background(), a.level, fmt.Sprintf("%d %s in the last %s", l.n, l.key, window),
			"aggregated", l.key, "count", l.n, "window", window.String())
	}
}

// Run flushes once per interval until ctx ends, then writes what was
// counted since the last flush, so that nothing counted before shutdown is
// lost.
func (a *Aggregator) Run(ctx context.Context) error {
	t := time.NewTicker(a.interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			a.Flush()
		case <-ctx.Done():
			a.Flush()
			return nil
		}
	}
}
