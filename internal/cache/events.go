package cache

import (
	"fmt"
	"time"
)

// EventKind names a stale-masking transition.
type EventKind string

const (
	// EventMaskingStarted: a route answered with a stale copy because its
	// origin failed, and was not doing so before.
	EventMaskingStarted EventKind = "stale-masking-started"
	// EventMaskingEnded: the route has not needed a stale answer for
	// Options.MaskingQuiet, either noticed by a successful origin answer or
	// by the periodic sweep.
	EventMaskingEnded EventKind = "stale-masking-ended"
)

// Event reports a transition of a route's stale masking, never a single
// request: one Started and one Ended per episode (design.md section 8).
type Event struct {
	Kind  EventKind
	Route string
	At    time.Time
	Since time.Time // start of the episode

	// Duration is At-Since for Ended events, 0 for Started.
	Duration time.Duration
	// StaleAnswers and OriginErrors count what happened during the episode
	// (for Started: the answer and error that began it).
	StaleAnswers uint64
	OriginErrors uint64
	// Evidence says what started or ended the episode, e.g.
	// `GET /page: origin status 502` or `origin answered 200`.
	Evidence string
}

// episode is one stretch of time during which a route hid origin failures.
type episode struct {
	since, lastStale time.Time
	stale, errors    uint64
}

// staleServed records an answer that hid one origin failure (counted in
// the episode's errors and stale answers) and starts an episode if none is
// running.
func (c *Cache) staleServed(rs *routeState, route, evidence string) {
	rs.emitMu.Lock()
	defer rs.emitMu.Unlock()
	now := c.now()
	rs.mu.Lock()
	started := rs.episode == nil
	if started {
		rs.episode = &episode{since: now}
		rs.masking.Store(true)
	}
	rs.episode.stale++
	rs.episode.errors++
	rs.episode.lastStale = now
	rs.mu.Unlock()
	if started {
		c.emit(Event{Kind: EventMaskingStarted, Route: route, At: now, Since: now,
			StaleAnswers: 1, OriginErrors: 1, Evidence: evidence})
	}
}

// staleAnswer records a stale answer that shared a failure already counted
// (a collapsed follower of a failed fetch).
func (rs *routeState) staleAnswer(now time.Time) {
	if !rs.masking.Load() {
		return
	}
	rs.mu.Lock()
	if rs.episode != nil {
		rs.episode.stale++
		rs.episode.lastStale = now
	}
	rs.mu.Unlock()
}

// episodeFailure counts an origin failure that no stale answer hid (the
// client saw it, or a background revalidation failed) towards the running
// episode, if any.
func (rs *routeState) episodeFailure() {
	if !rs.masking.Load() {
		return
	}
	rs.mu.Lock()
	if rs.episode != nil {
		rs.episode.errors++
	}
	rs.mu.Unlock()
}

// originSucceeded ends the route's episode if the origin answered well and
// no stale answer was needed for the quiet period. Requiring the quiet
// period keeps a half-broken pool (incident 004: 40% errors) from flapping
// the event on every other request.
func (c *Cache) originSucceeded(rs *routeState, route string, status int) {
	if !rs.masking.Load() {
		return
	}
	c.endEpisode(rs, route, fmt.Sprintf("origin answered %d", status))
}

// sweep ends the episodes of routes that stopped needing stale answers but
// see no traffic that would notice it.
func (c *Cache) sweep() {
	c.routes.Range(func(k, v any) bool {
		rs := v.(*routeState)
		if rs.masking.Load() {
			c.endEpisode(rs, k.(string), fmt.Sprintf("no stale answer for %s", c.quiet))
		}
		return true
	})
}

func (c *Cache) endEpisode(rs *routeState, route, evidence string) {
	rs.emitMu.Lock()
	defer rs.emitMu.Unlock()
	now := c.now()
	rs.mu.Lock()
	ep := rs.episode
	if ep == nil || now.Sub(ep.lastStale) < c.quiet {
		rs.mu.Unlock()
		return
	}
	rs.episode = nil
	rs.masking.Store(false)
	rs.mu.Unlock()
	c.emit(Event{Kind: EventMaskingEnded, Route: route, At: now, Since: ep.since,
		Duration: now.Sub(ep.since), StaleAnswers: ep.stale, OriginErrors: ep.errors, Evidence: evidence})
}

// emit runs under the route's emitMu (not its counters' lock), so that a
// route's Started and Ended are delivered in order and exactly once while
// OnEvent may still read Stats.
func (c *Cache) emit(ev Event) {
	if c.onEvent != nil {
		c.onEvent(ev)
	}
}
