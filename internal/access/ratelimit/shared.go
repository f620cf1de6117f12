package ratelimit

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// Shared keeps the buckets of shared zones in Redis, so that several sturdy
// instances see one budget per key. The bucket is the same GCRA as Table's,
// run atomically by a Lua script on Redis's own clock (so that instances
// whose clocks differ still agree), with each key expiring once its bucket
// has drained: Redis's memory is bounded by the keys being limited.
//
// When a call fails or times out the store is marked down, an event is
// sent, and every shared zone decides on its local Table until Run's probe
// reaches Redis again (another event). A client's budget is then per
// instance for a while: limits stay in force, only looser by the number of
// instances, which beats refusing traffic or skipping limits.
type Shared struct {
	client  *redis.Client
	addr    string
	prefix  string
	probe   time.Duration
	up      atomic.Bool
	onEvent func(SharedEvent)
}

// SharedEvent is a change of the store's reachability.
type SharedEvent struct {
	Addr string
	Up   bool  // true: back to shared buckets; false: on local buckets
	Err  error // why it went down (nil when Up)
}

// NewShared prepares the store of cfg; it dials nothing and starts no
// goroutine (Run probes). onEvent is called once per change, from the
// request that saw the failure or from Run; it must not block. It may be nil.
func NewShared(cfg *config.SharedLimits, onEvent func(SharedEvent)) *Shared {
	timeout := cfg.Timeout.D()
	if timeout <= 0 {
		timeout = config.DefaultSharedTimeout
	}
	probe := cfg.Probe.D()
	if probe <= 0 {
		probe = config.DefaultSharedProbe
	}
	s := &Shared{
		client: redis.NewClient(&redis.Options{
			Addr: cfg.Redis, DB: cfg.DB,
			DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout,
			ContextTimeoutEnabled: true,
			// A failed call falls back at once; retrying would make every
			// request of the zone wait for a Redis that is not there.
			MaxRetries:      -1,
			DialerRetries:   1,
			DisableIdentity: true,
		}),
		addr: cfg.Redis, prefix: cfg.Prefix, probe: probe, onEvent: onEvent,
	}
	if s.prefix == "" {
		s.prefix = config.DefaultSharedPrefix
	}
	s.up.Store(true)
	return s
}

// Up reports whether shared zones use Redis now.
func (s *Shared) Up() bool { return s.up.Load() }

// Run probes Redis while it is marked down, until ctx ends; then it closes
// the connections.
func (s *Shared) Run(ctx context.Context) error {
	t := time.NewTicker(s.probe)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return s.client.Close()
		case <-t.C:
		}
		if s.up.Load() {
			continue
		}
		if !s.answers(ctx) {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, s.probe)
		err := s.client.Ping(pctx).Err()
		cancel()
		if err == nil && s.up.CompareAndSwap(false, true) && s.onEvent != nil {
			s.onEvent(SharedEvent{Addr: s.addr, Up: true})
		}
	}
}

// answers reports whether Redis answers PING on a connection of its own.
// The probe does not go through the client: its pool logs every failed
// dial, which would be a line per probe for as long as Redis is down.
func (s *Shared) answers(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, s.probe)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return false
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	c.SetDeadline(deadline)
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	buf := make([]byte, 7)
	_, err = io.ReadFull(c, buf)
	return err == nil && string(buf) == "+PONG\r\n"
}

// Close closes the connections (for a Shared that Run never ran).
func (s *Shared) Close() error { return s.client.Close() }

// gcra is Table.Take in Redis, in microseconds of Redis's clock. ARGV[1]
// is the interval, ARGV[2] the burst; the reply is {1, debt} when the
// request is accepted (debt decides the delay) and {0, wait} when it is
// rejected. Numbers go back to Redis through %.0f: Lua's default
// conversion keeps only 14 digits.
var gcra = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local iv = tonumber(ARGV[1])
local burst = tonumber(ARGV[2]) * iv
local tat = tonumber(redis.call('GET', KEYS[1]))
if not tat then
  redis.call('SET', KEYS[1], string.format('%.0f', now), 'PX', math.ceil(iv / 1000))
  return {1, 0}
end
local newtat = math.max(now, tat + iv)
local debt = newtat - now
if debt > burst then
  return {0, tat + iv - burst - now}
end
redis.call('SET', KEYS[1], string.format('%.0f', newtat), 'PX', math.ceil((debt + iv) / 1000))
return {1, debt}
`)

var errDown = errors.New("shared rate limit store is down")

func (s *Shared) take(ctx context.Context, zone string, strict bool, key string, interval int64, burst, delay int) (Decision, error) {
	if !s.up.Load() {
		return Decision{}, errDown
	}
	k := s.prefix + zone
	if strict {
		k += ":attributed"
	}
	k += ":" + key
	ivus := max(interval/1000, 1)
	res, err := gcra.Run(ctx, s.client, []string{k}, ivus, burst).Int64Slice()
	if err != nil || len(res) != 2 {
		if err == nil {
			err = errors.New("unexpected reply from the rate limit script")
		}
		// A client that went away is no sign of a Redis problem.
		if ctx.Err() == nil && s.up.CompareAndSwap(true, false) && s.onEvent != nil {
			s.onEvent(SharedEvent{Addr: s.addr, Err: err})
		}
		return Decision{}, err
	}
	v := time.Duration(res[1]) * time.Microsecond
	if res[0] == 0 {
		return Decision{Verdict: Reject, Wait: v}, nil
	}
	if delay >= 0 {
		if wait := v - time.Duration(delay)*time.Duration(ivus)*time.Microsecond; wait > 0 {
			return Decision{Verdict: Delay, Wait: wait}, nil
		}
	}
	return Decision{}, nil
}
