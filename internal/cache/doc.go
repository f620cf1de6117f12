// Package cache is sturdy's RFC 9111 shared cache for reverse-proxied routes.
//
// A Cache sits between the proxy's handler and its balancing loop: the
// proxy calls Serve with the route's Policy and a Fetch that asks the
// origin, and Serve returns the response to send: one from the store, the
// origin's own (its body teed into the store as the proxy streams it), or a
// bounded stale copy. The cache never writes to the client; the proxy
// streams every response the same way, cached route or not.
//
// The design follows "caching never lies" (design.md section 7, incident
// 004, where a CDN hid a 40% origin error rate for hours behind
// stale-if-error=86400):
//
//   - stale-while-revalidate and stale-if-error (RFC 5861) are capped per
//     route (15 minutes by default) whatever the origin asks for;
//   - every answer says what happened in an RFC 9211 Cache-Status field,
//     and every answer from the store carries Age (RFC 9111 4.2.3);
//   - origin errors are counted whether or not a stale answer hid them, and
//     a route that starts or stops hiding errors is an Event, not a log
//     line per request;
//   - health endpoints are never cached, and memory is bounded in bytes.
//
// Files: cache.go (API and request flow), policy.go (per-route knobs and
// bypass rules), control.go (Cache-Control), entry.go (freshness, age,
// storability), key.go (keys and Vary), store.go (the weight-bounded otter
// store), flight.go (request collapsing), origin.go (fetching, storing),
// tee.go (the origin body's way to the store), revalidate.go (background
// refresh), stale.go (stale rules and ServeStale), respond.go (answers from
// the store, conditionals), status.go (Cache-Status), stats.go and
// events.go (what operators see).
package cache
