// Package drill re-enacts the five incidents in ../shared/incidents on
// loopback and reports what clients saw: `sturdy drill`.
//
// A scenario starts the misbehaving parts of its incident (internal/testing/fake:
// a WAF that blocks one client, a pool whose hosts refuse or never answer,
// a slow report endpoint, Node-like backends that hang up on raw non-ASCII
// request targets, a cache-friendly origin with one failing instance), puts
// a proxy in front of them, runs bounded load from several client source
// addresses in 127.0.0.0/8, stops everything it started, and returns a
// Result: what innocent clients got, what the bad client got, ejections,
// pool-empty time, stale answers, log volume, and a verdict in operator
// words.
//
// The proxy is a Target: sturdy in-process with a built-in config per
// scenario (Builtin), sturdy with an operator's own config whose pools are
// swapped for the fakes (FromConfig), or Debian's nginx with a config in the
// style each incident describes (Nginx). The scenarios judge every target
// by the same rules, from what clients saw, so the tables can be compared
// side by side.
//
// Features are detected by behaviour, never assumed: a scenario whose
// feature a target does not have (yet) says so in its verdict instead of
// passing.
//
// Files: drill.go (options, scenarios, running), target.go (what a
// scenario asks of a proxy), sturdy.go and adapt.go (sturdy targets),
// nginx.go and nginxconf.go (the nginx target), observe.go (log lines,
// events, counters), load.go (bounded load from distinct addresses),
// addrs.go (the loopback address plan), result.go and report.go (results
// and tables), and one scenario_*.go per incident.
package drill
