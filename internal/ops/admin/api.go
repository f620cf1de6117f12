package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/view"
)

type api struct {
	b     Backend
	token string
	log   *slog.Logger
	csrf  *http.CrossOriginProtection
}

type errorBody struct {
	Error  string   `json:"error"`
	Errors []string `json:"errors,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// readyz answers 200 when sturdy can answer every counted route properly,
// and 503 with the reasons otherwise (shutting down, a route left with
// only its sorry page). Orchestrators read the status; operators the text.
func (a *api) readyz(w http.ResponseWriter, r *http.Request) {
	st := a.b.Status()
	ready, reasons := st.Ready && !st.Draining, st.NotReady
	if st.Draining && !slices.ContainsFunc(reasons, func(s string) bool { return strings.Contains(s, "shutting down") }) {
		reasons = append([]string{"shutting down: finishing in-flight requests"}, reasons...)
	}
	if !ready && len(reasons) == 0 {
		reasons = []string{"not ready"}
	}
	code := http.StatusOK
	if !ready {
		code = http.StatusServiceUnavailable
	}
	if strings.Contains(r.Header.Get("Accept"), "application/json") {
		writeJSON(w, code, struct {
			Ready   bool     `json:"ready"`
			Reasons []string `json:"reasons,omitempty"`
		}{ready, reasons})
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	if ready {
		w.Write([]byte("ready\n"))
		return
	}
	var b strings.Builder
	b.WriteString("not ready:\n")
	for _, s := range reasons {
		b.WriteString("- " + s + "\n")
	}
	w.Write([]byte(b.String()))
}

// guard admits a state-changing request only from a same-origin or
// non-browser client that presents the token.
func (a *api) guard(next http.HandlerFunc) http.Handler {
	authed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.token == "" {
			writeJSON(w, http.StatusForbidden, errorBody{Error: "the runtime API is disabled: set admin.token in the config and send it as Authorization: Bearer TOKEN"})
			return
		}
		if !a.validToken(r.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sturdy admin"`)
			writeJSON(w, http.StatusUnauthorized, errorBody{Error: "missing or wrong token: send Authorization: Bearer TOKEN with admin.token"})
			return
		}
		next(w, r)
	})
	return a.csrf.Handler(authed)
}

// validToken compares in constant time. Hashing first makes the time
// independent of the token's length as well as its bytes.
func (a *api) validToken(header string) bool {
	scheme, tok, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	want := sha256.Sum256([]byte(a.token))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

func (a *api) setHostMode(w http.ResponseWriter, r *http.Request) {
	pool, addr, mode := r.PathValue("pool"), r.PathValue("addr"), r.PathValue("mode")
	switch mode {
	case ModeDrain, ModeMaintenance, ModeReady:
	default:
		writeJSON(w, http.StatusNotFound, errorBody{Error: "unknown mode " + quote(mode) + "; expected drain, maintenance or ready"})
		return
	}
	if msg := findHost(a.b.Status(), pool, addr); msg != "" {
		writeJSON(w, http.StatusNotFound, errorBody{Error: msg})
		return
	}
	if err := a.b.SetHostMode(pool, addr, mode); err != nil {
		code := http.StatusConflict
		if errors.Is(err, ErrUnknownHost) {
			code = http.StatusNotFound
		}
		writeJSON(w, code, errorBody{Error: err.Error()})
		return
	}
	a.log.Info("admin: host mode set", "pool", pool, "host", addr, "mode", mode, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, struct {
		OK   bool   `json:"ok"`
		Pool string `json:"pool"`
		Host string `json:"host"`
		Mode string `json:"mode"`
	}{true, pool, addr, mode})
}

// findHost returns "" when pool has host addr, or a message that says what
// exists instead.
func findHost(st view.Status, pool, addr string) string {
	var pools []string
	for _, p := range st.Pools {
		pools = append(pools, p.Name)
		if p.Name != pool {
			continue
		}
		var hosts []string
		for _, h := range p.Hosts {
			if h.Addr == addr {
				return ""
			}
			hosts = append(hosts, h.Addr)
		}
		return "pool " + quote(pool) + " has no host " + quote(addr) + "; it has " + strings.Join(hosts, ", ")
	}
	return "no pool " + quote(pool) + "; pools are " + strings.Join(pools, ", ")
}

func (a *api) reload(w http.ResponseWriter, r *http.Request) {
	err := a.b.Reload()
	if err == nil {
		st := a.b.Status()
		a.log.Info("admin: config reloaded", "config_hash", st.ConfigHash, "remote", r.RemoteAddr)
		writeJSON(w, http.StatusOK, struct {
			OK         bool   `json:"ok"`
			ConfigHash string `json:"config_hash"`
		}{true, st.ConfigHash})
		return
	}
	a.log.Warn("admin: config reload refused", "err", err, "remote", r.RemoteAddr)
	var list config.ErrorList
	if errors.As(err, &list) {
		body := errorBody{Error: "the new config is invalid; the running config is unchanged"}
		for _, e := range list {
			body.Errors = append(body.Errors, e.Error())
		}
		writeJSON(w, http.StatusUnprocessableEntity, body)
		return
	}
	writeJSON(w, http.StatusConflict, errorBody{Error: "reload failed; the running config is unchanged: " + err.Error()})
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// loopbackHost refuses requests whose Host is a name other than localhost.
// A loopback listener is only reachable from this machine, so a legitimate
// client names it 127.0.0.1, [::1] or localhost; any other name means a
// browser was pointed here by a rebinding DNS answer.
func loopbackHost(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if hh, _, err := net.SplitHostPort(host); err == nil {
			host = hh
		}
		host = strings.Trim(host, "[]")
		if _, err := netip.ParseAddr(host); err != nil && !strings.EqualFold(host, "localhost") {
			writeJSON(w, http.StatusMisdirectedRequest, errorBody{Error: "this admin listener is loopback-only; address it as 127.0.0.1 or localhost, not " + quote(r.Host)})
			return
		}
		h.ServeHTTP(w, r)
	})
}
