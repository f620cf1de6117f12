package health

import "time"

// Passive tunes outlier detection from real traffic: config's
// pools[].health.passive with its defaults applied (compile converts it).
// The zero value has passive evidence on with zero thresholds; compiled
// pools always carry the config's defaults.
type Passive struct {
	// Off turns passive evidence off: failures are still attributed and
	// counted, but never take a host out.
	Off bool
	// Window is the sliding window failures are counted in.
	Window time.Duration
	// MinRequests is the least traffic a host must have seen in the window
	// before its failure rate is judged.
	MinRequests int
	// MinClients is how many distinct clients must have failed on a host
	// in the window before its failures count as the host's.
	MinClients int
	// FailureRate (0..1) is the host-attributed failure share that makes a
	// host an outlier.
	FailureRate float64
	// ConsecutiveConnectFailures makes a host suspect at once when that
	// many connection attempts in a row failed.
	ConsecutiveConnectFailures int
	// MaxEjected (0..1) is the largest share of the pool passive evidence
	// may take out of rotation.
	MaxEjected float64
	// EjectTime is the first ejection's length; each repeat doubles it up
	// to MaxEjectTime.
	EjectTime, MaxEjectTime time.Duration
	// SlowStart ramps a returning host's share up over this long.
	SlowStart time.Duration
	// TrialInterval is how often each host of a failing pool gets one
	// trial request.
	TrialInterval time.Duration
	// GrayFailure takes out a host whose probe passes while its traffic
	// fails.
	GrayFailure GrayFailure
}

// GrayFailure is what the health model does when the probe and the
// traffic disagree.
type GrayFailure struct {
	// Off turns the check off.
	Off bool
	// Disagreements is how many times a probe must clear a host that real
	// traffic made suspect, within Within, before the host is taken out.
	Disagreements int
	Within        time.Duration
}

// On reports whether passive evidence is used.
func (p Passive) On() bool { return !p.Off }

// On reports whether gray failure detection is on.
func (g GrayFailure) On() bool { return !g.Off }
