package status

import (
	"regexp"
	"strings"
	"sync"

	"github.com/sturdyproxy/sturdy/internal/view"
)

// The health model records what it saw as it saw it: outcome classes
// (connect_refused), Go's error text (context deadline exceeded), a
// probe's answer. An operator needs what that means and what to check;
// the recorded text stays, as the problem's detail.

// failureKind is one way a backend fails, in words.
type failureKind struct {
	what  string // what happens, e.g. "it does not answer in time"
	check string // what to check, a sentence
}

// kinds are tried in order on the lowercased text; the first whose
// pattern occurs wins, so the more specific come first.
var kinds = []struct {
	patterns []string
	kind     failureKind
}{
	{[]string{"probe passes but real traffic fails", "probe_disagrees"}, failureKind{
		"its health check passes while real requests fail",
		"Check what real requests need that the health check does not (a database, another service)."}},
	{[]string{"x509", "tls:", "tls_error", "tls handshake", "certificate", "first record does not look like a tls handshake"}, failureKind{
		"the TLS handshake with it fails",
		"Check its certificate (expiry, names, issuer) and the pool's tls settings (server_name, ca)."}},
	{[]string{"no such host", "dns_error", "server misbehaving"}, failureKind{
		"its name does not resolve",
		"Check the DNS name and the resolver sturdy uses."}},
	{[]string{"connection refused", "connect_refused", "refused"}, failureKind{
		"nothing accepts connections on its address (connection refused)",
		"Check that the backend runs and listens on that address and port."}},
	{[]string{"no route to host", "network is unreachable", "host is unreachable"}, failureKind{
		"it cannot be reached over the network",
		"Check routing and firewalls between sturdy and it."}},
	{[]string{"connect_timeout", "dial tcp", "i/o timeout"}, failureKind{
		"connecting to it times out",
		"Check that the machine is up and that no firewall drops the packets."}},
	{[]string{"context deadline exceeded", "client.timeout", "timeout awaiting", "awaiting headers", "response_timeout", "deadline", "timed out", "timeout"}, failureKind{
		"it accepts connections but does not answer in time",
		"Check its load, its logs and what it waits on; if it is slow by design, raise the timeout."}},
	{[]string{"connection reset", "reset by peer", "broken pipe", "reset"}, failureKind{
		"it resets connections",
		"Check its logs for crashes or restarts, and anything in between that cuts connections."}},
	{[]string{"eof_before_response", "unexpected eof", "eof", "server closed", "closed the connection"}, failureKind{
		"it closes connections without answering",
		"Check its logs for crashes, and that its keep-alive timeout is longer than sturdy's idle timeout."}},
	{[]string{"malformed http", "bad_response", "malformed"}, failureKind{
		"its answers are not valid HTTP",
		"Check that this port speaks HTTP (not TLS or another protocol) and the pool's scheme."}},
	{[]string{"status_5xx", "status 5", " 5xx"}, failureKind{
		"it answers with server errors (5xx)",
		"Check its logs."}},
	{[]string{"body lacks"}, failureKind{
		"its health check's answer lacks the expected text",
		"Check the backend and the pool's health.active.expect_body."}},
	{[]string{"status 4", "status 3", "expected 2"}, failureKind{
		"its health check gets an unexpected status",
		"Check the pool's health.active path, host and expect_status against what the backend serves."}},
}

// classify finds the failure kind text describes; the zero kind when none.
func classify(text string) failureKind {
	t := strings.ToLower(text)
	for _, k := range kinds {
		for _, p := range k.patterns {
			if strings.Contains(t, p) {
				return k.kind
			}
		}
	}
	return failureKind{}
}

// probeStatus is compiled on first use: the status page is off unless the
// admin listener is on, and a regexp compiled at start stays in the heap.
var probeStatus = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`status (\d{3}), expected ([0-9-]+)`)
})

// hostWhy says why a host is out (or suspect), in words, with what to
// check: from its latest probe when it is down on its probes, else from
// the traffic's evidence.
func hostWhy(p view.Pool, h view.Host) string {
	check := "Its health check"
	if c := p.ActiveCheck; c != "" {
		check += " (" + strings.SplitN(c, " every ", 2)[0] + ")"
	}
	var lead, text string
	switch h.State {
	case view.Down:
		lead, text = check+" fails: ", h.CheckDetail+" "+h.Evidence
		if h.LastCheckOK {
			// Coming back: it returns after enough passes in a row.
			lead, text = check+" failed, and its last probe passed (it returns after enough passes in a row): ", h.Evidence
		}
		if m := probeStatus().FindStringSubmatch(text); m != nil {
			k := classify(text)
			return check + " answers " + m[1] + " instead of " + m[2] + ": " + k.what + ". " + k.check
		}
	case view.Ejected:
		lead, text = "Taken out of rotation on its traffic: ", h.Reason+" "+h.Evidence
	case view.Suspect:
		lead, text = "Its traffic fails, and it is tried only when its peers cannot take a request: ", h.Reason+" "+h.Evidence
		if p.ActiveCheck != "" {
			lead = "Its traffic fails; a health check decides at once: "
		}
	}
	k := classify(text)
	if k.what == "" && h.CheckDetail != "" && !h.LastCheckOK {
		k = classify(h.CheckDetail) // what its latest probe met
	}
	if k.what == "" {
		// Nothing sturdy knows how to word: its own reason is English.
		return upperFirst(h.Reason) + "."
	}
	return lead + k.what + ". " + k.check
}

// hostDetail is the evidence as recorded: the reason, the evidence and the
// latest probe when it failed some other way.
func hostDetail(h view.Host) string {
	parts := []string{h.Reason}
	if h.Evidence != "" {
		parts = append(parts, h.Evidence)
	}
	if !h.LastCheckOK && h.CheckDetail != "" && h.CheckDetail != h.Evidence && !h.LastCheck.IsZero() {
		parts = append(parts, "last probe: "+h.CheckDetail)
	}
	return strings.Join(parts, " — ")
}

// explainHosts words each host that is not healthy for the hosts table,
// as Needs attention words it.
func explainHosts(pools []view.Pool) {
	for i := range pools {
		p := pools[i]
		for j, h := range p.Hosts {
			if h.State != view.Healthy && h.Reason != "" {
				pools[i].Hosts[j].Why = hostWhy(p, h)
			}
		}
	}
}
