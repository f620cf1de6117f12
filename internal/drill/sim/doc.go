// Package sim is a fault simulator whose ground truth is known: it draws
// a world from a seed (N hosts, M innocent clients, K routes, and faults
// with a true owner, their start, end, rate and overlap), plays it against
// the real proxy (internal/server's, either front end), and compares what
// sturdy concluded (its events, the status snapshot's counters, the
// answers it gave) with the truth.
//
// The owners are design.md's: a host (it resets, hangs, answers 5xx, goes
// gray, or sheds load with 503 + Retry-After, which is full rather than
// broken), a client (a scanner a WAF in front of every host refuses, a
// body whose framing lies, a stalled upload, one that hangs up), a route
// (slow or failing on every host), a request (it kills whatever serves
// it, incident 003), and sturdy itself (out of file descriptors).
//
// A run is either in memory, on pipes inside a testing/synctest bubble
// (net/http's front end; a 30 s world takes a fraction of a second), or
// on the kernel's loopback in real time (both front ends: the native one
// waits for readiness on the socket itself, which a pipe has not). The
// Report of a run is plain data; Tally sums many and writes the table
// docs/health.md shows. A seed fixes the world, not the goroutines'
// interleaving: a run is reproducible in what happens, not to the
// millisecond.
//
// Files: world.go (the draw), host.go (backends and their WAF), clients.go
// (innocent and faulty clients), net.go (memory and loopback networks),
// run.go (one run), observe.go (what sturdy said), judge.go (truth against
// conclusions, invariants), known.go (the invariants main is known to
// break), table.go (the tally).
package sim
