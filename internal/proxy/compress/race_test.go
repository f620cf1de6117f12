//go:build race

package compress

// raceEnabled: under the race detector sync.Pool drops objects at random,
// so tests of pooling skip.
const raceEnabled = true
