package demo

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/fake"
)

// Paths of the controls. The admin listener serves them: GET is open like
// the rest of its reads, POST needs the admin token.
const (
	StatePath = "/api/demo"
	prefix    = StatePath + "/"
)

// malformedTargets are sent as raw bytes, as a broken client or an attack
// would (incident 003: raw UTF-8 in a URL made Node backends hang up, and
// nginx took them for dead).
var malformedTargets = []struct{ target, what string }{
	{"/search?q=\xe4\xbd\xa0\xe5\xa5\xbd", "raw UTF-8 in the query"},
	{"/caf\xe9/menu", "a raw Latin-1 byte in the path"},
	{"/files/../../etc/passwd", "dot segments climbing out of the path"},
	{"/report/%zz", "a broken percent-encoding in the path"},
	{"/a\x01b", "a control byte"},
}

// MalformedResult is what one malformed request got.
type MalformedResult struct {
	Target string `json:"target"` // raw and control bytes shown as \xNN
	What   string `json:"what"`
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
}

// showBytes writes bytes outside printable ASCII as \xNN.
func showBytes(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			fmt.Fprintf(&b, "\\x%02x", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// sendMalformed sends each malformed target three times and returns what
// each got the last time.
func (l *Lab) sendMalformed() []MalformedResult {
	host := l.listen
	var out []MalformedResult
	for _, m := range malformedTargets {
		res := MalformedResult{Target: showBytes(m.target), What: m.what}
		for range 3 {
			status, err := fake.RawGet("127.0.0.1", l.listen, host, m.target, 3*time.Second)
			res.Status, res.Error = status, ""
			if err != nil {
				res.Error = err.Error()
			}
		}
		out = append(out, res)
	}
	l.mu.Lock()
	l.malformed = out
	l.mu.Unlock()
	return out
}

// State is what GET /api/demo answers: enough for the status page to draw
// its demo panel.
type State struct {
	Backends []BackendState `json:"backends"`
	Modes    []Mode         `json:"modes"`
	Visitors TrafficState   `json:"visitors"`
	Scanner  ScannerState   `json:"scanner"`
	// Malformed is what the last batch of malformed requests got.
	Malformed []MalformedResult `json:"malformed,omitempty"`
	// Commands do the same as the panel's buttons, from a shell.
	Commands []Command `json:"commands"`
}

// BackendState is one backend.
type BackendState struct {
	Name       string `json:"name"`
	Addr       string `json:"addr"`
	Mode       string `json:"mode"`
	WAFRefused uint64 `json:"waf_refused"` // scanner requests its WAF refused
}

// TrafficState is a traffic source's answers.
type TrafficState struct {
	Running bool     `json:"running"`
	Clients []string `json:"clients"`
	Sent    uint64   `json:"sent"`
	OK      uint64   `json:"ok"`
	Refused uint64   `json:"refused_4xx"`
	Failed  uint64   `json:"failed"` // 5xx or no answer
}

// ScannerState is the scanner's.
type ScannerState struct {
	TrafficState
	Until time.Time `json:"until,omitzero"`
}

// Command is one thing to try from a shell.
type Command struct {
	What string `json:"what"`
	Run  string `json:"run"`
}

func (c *counts) state(running bool, clients []string) TrafficState {
	return TrafficState{Running: running, Clients: clients, Sent: c.sent.Load(), OK: c.ok.Load(), Refused: c.refused.Load(), Failed: c.failed.Load()}
}

// State returns the demo's state; admin is the admin listener's host:port,
// for the commands.
func (l *Lab) State(admin string) State {
	st := State{Modes: Modes, Commands: l.Commands(admin)}
	for _, b := range l.backends {
		st.Backends = append(st.Backends, BackendState{Name: b.name, Addr: b.addr, Mode: b.Mode(), WAFRefused: b.wafRefused.Load()})
	}
	st.Visitors = l.visits.state(l.visitorsOn.Load(), l.visitors)
	l.mu.Lock()
	st.Scanner = ScannerState{TrafficState: l.scans.state(l.scan != nil, []string{ScannerAddr})}
	if l.scan != nil {
		st.Scanner.Until = l.scan.until
	}
	st.Malformed = l.malformed
	l.mu.Unlock()
	return st
}

// Commands are the curl lines that break and heal things, with the admin
// token as $T.
func (l *Lab) Commands(admin string) []Command {
	api := "curl -s -X POST -H \"Authorization: Bearer $T\" http://" + admin + prefix
	b2 := "b2"
	if len(l.backends) > 1 {
		b2 = l.backends[1].name
	}
	return []Command{
		{"make " + b2 + " answer 503 (also: slow, reset, blackhole; ok heals it)", api + "backends/" + b2 + "/503"},
		{"start a scanner that the WAF in front of every backend refuses", api + "scanner/start"},
		{"send malformed URLs (raw UTF-8, dot segments, control bytes)", api + "malformed"},
		{"heal every backend and stop the scanner", api + "heal"},
		{"see a backend's own 503 passed through, and the route's error rate rise", "curl -i http://" + l.listen + "/status/503"},
		{"a request slow on every backend: the request's fault, no host's", "curl -i 'http://" + l.listen + "/slow?ms=3000'"},
		{"a raw non-ASCII URL, re-encoded at the edge", "curl -i --path-as-is $'http://" + l.listen + "/caf\\xe9'"},
		{"a cached page: after breaking all three backends it comes stale, labelled", "curl -i http://" + l.listen + "/cached/page"},
	}
}

// Handler returns the controls, for the admin listener to serve at
// StatePath and under it. It expects the admin listener to have checked
// the token for POSTs.
func (l *Lab) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+StatePath, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, l.State(adminHost(r)))
	})
	mux.HandleFunc("POST "+prefix+"backends/{name}/{mode}", func(w http.ResponseWriter, r *http.Request) {
		name, mode := r.PathValue("name"), r.PathValue("mode")
		i, ok := modeIndex(mode)
		if !ok {
			var names []string
			for _, m := range Modes {
				names = append(names, m.Name)
			}
			fail(w, http.StatusNotFound, fmt.Sprintf("unknown mode %q; modes are %s", mode, strings.Join(names, ", ")))
			return
		}
		for _, b := range l.backends {
			if b.name == name {
				b.mode.Store(i)
				done(w, fmt.Sprintf("backend %s (%s) %s", b.name, b.addr, Modes[i].Does))
				return
			}
		}
		fail(w, http.StatusNotFound, fmt.Sprintf("no backend %q; backends are b1 to b%d", name, len(l.backends)))
	})
	mux.HandleFunc("POST "+prefix+"scanner/{action}", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("action") {
		case "start":
			msg, err := l.startScanner()
			if err != nil {
				fail(w, http.StatusConflict, err.Error())
				return
			}
			done(w, msg)
		case "stop":
			done(w, l.stopScanner())
		default:
			fail(w, http.StatusNotFound, "the scanner can start or stop")
		}
	})
	mux.HandleFunc("POST "+prefix+"visitors/{action}", func(w http.ResponseWriter, r *http.Request) {
		switch a := r.PathValue("action"); {
		case len(l.visitors) == 0:
			fail(w, http.StatusConflict, "this demo runs without visitors")
		case a == "start":
			l.visitorsOn.Store(true)
			done(w, "the visitors send requests again")
		case a == "stop":
			l.visitorsOn.Store(false)
			done(w, "the visitors are paused")
		default:
			fail(w, http.StatusNotFound, "visitors can start or stop")
		}
	})
	mux.HandleFunc("POST "+prefix+"malformed", func(w http.ResponseWriter, r *http.Request) {
		res := l.sendMalformed()
		var parts []string
		for _, m := range res {
			got := strconv.Itoa(m.Status)
			if m.Error != "" {
				got = m.Error
			}
			parts = append(parts, m.What+": "+got)
		}
		writeJSON(w, http.StatusOK, struct {
			OK      bool              `json:"ok"`
			Message string            `json:"message"`
			Results []MalformedResult `json:"results"`
		}{true, "sent " + strconv.Itoa(3*len(res)) + " malformed requests: " + strings.Join(parts, "; "), res})
	})
	mux.HandleFunc("POST "+prefix+"heal", func(w http.ResponseWriter, r *http.Request) {
		for _, b := range l.backends {
			b.mode.Store(0)
		}
		msg := l.stopScanner()
		done(w, "every backend answers normally again; "+msg+"; sturdy brings the hosts back as their probes pass")
	})
	return mux
}

// adminHost is the address the client reached the admin listener at.
func adminHost(r *http.Request) string {
	if _, _, err := net.SplitHostPort(r.Host); err == nil {
		return r.Host
	}
	return "127.0.0.1:9901"
}

func done(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusOK, struct {
		OK      bool   `json:"ok"`
		Message string `json:"message"`
	}{true, msg})
}

func fail(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, struct {
		Error string `json:"error"`
	}{msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
