package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sturdyproxy/sturdy/internal/compile"
	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// cmdReload checks the config file, asks the running sturdy to reload it
// and waits for the outcome: through the admin API with its token when the
// config has both, else with SIGHUP to the running process (--pid, $MAINPID
// as systemd sets it for ExecReload, or pid_file), confirmed through the
// admin listener's status when there is one. It exits 1 when the file is
// invalid or the running sturdy refused it.
func (p *program) cmdReload(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := p.newFlags("reload", stderr)
	file := configFlag(fs)
	pidFlag := fs.Int("pid", 0, "process to send SIGHUP to (default: $MAINPID, else pid_file)")
	wait := fs.Duration("timeout", 30*time.Second, "how long to wait for the running sturdy to answer")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg, err := config.Load(*file)
	if err != nil {
		printConfigError(stderr, err)
		fmt.Fprintln(stderr, "not reloaded: the running sturdy keeps its config")
		return exitFail
	}
	rt, err := compile.Compile(cfg, nil, compile.Env{})
	if err != nil {
		printConfigError(stderr, err)
		fmt.Fprintln(stderr, "not reloaded: the running sturdy keeps its config")
		return exitFail
	}
	rt.Close()
	admin := adminURL(cfg.Admin.Listen)
	c := &http.Client{Timeout: *wait}
	if admin != "" && cfg.Admin.Token != "" {
		return reloadByAPI(ctx, c, admin, cfg.Admin.Token, stdout, stderr)
	}
	pid, err := runningPID(*pidFlag, cfg.PIDFile)
	if err != nil {
		fmt.Fprintf(stderr, "cannot find the running sturdy: %v\n", err)
		return exitFail
	}
	var before view.Reloads
	if admin != "" {
		if st, err := fetchStatus(ctx, c, admin); err == nil {
			before = st.Reloads
		}
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		fmt.Fprintf(stderr, "cannot signal process %d: %v\n", pid, err)
		return exitFail
	}
	if admin == "" {
		fmt.Fprintf(stdout, "%s is valid; SIGHUP sent to process %d (no admin listener to confirm the outcome)\n", *file, pid)
		return exitOK
	}
	deadline := time.Now().Add(*wait)
	for time.Now().Before(deadline) {
		st, err := fetchStatus(ctx, c, admin)
		if err == nil && st.Reloads.OK+st.Reloads.Failed > before.OK+before.Failed {
			if st.Reloads.Failed > before.Failed && st.Reloads.LastErr != "" {
				fmt.Fprintf(stderr, "reload refused by process %d; its config is unchanged:\n%s\n", pid, st.Reloads.LastErr)
				return exitFail
			}
			fmt.Fprintf(stdout, "reloaded: process %d serves config %s\n", pid, st.ConfigHash)
			return exitOK
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Fprintf(stderr, "process %d did not report a reload within %s\n", pid, *wait)
	return exitFail
}

func reloadByAPI(ctx context.Context, c *http.Client, admin, token string, stdout, stderr io.Writer) int {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, admin+"/api/reload", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "no sturdy answers on %s (is it running?): %v\n", admin, err)
		return exitFail
	}
	defer resp.Body.Close()
	var body struct {
		OK         bool     `json:"ok"`
		ConfigHash string   `json:"config_hash"`
		Error      string   `json:"error"`
		Errors     []string `json:"errors"`
	}
	json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body)
	if resp.StatusCode == http.StatusOK && body.OK {
		fmt.Fprintf(stdout, "reloaded: config %s\n", body.ConfigHash)
		return exitOK
	}
	msg := body.Error
	if msg == "" {
		msg = resp.Status
	}
	fmt.Fprintf(stderr, "reload refused: %s\n", msg)
	for _, e := range body.Errors {
		fmt.Fprintln(stderr, e)
	}
	return exitFail
}

// adminURL is the base URL to reach an admin listener at listen, or "".
func adminURL(listen string) string {
	if listen == "" || listen == "off" {
		return ""
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil || port == "0" {
		return ""
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

func fetchStatus(ctx context.Context, c *http.Client, admin string) (view.Status, error) {
	var st view.Status
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/api/status", nil)
	resp, err := c.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("%s/api/status: %s", admin, resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// runningPID finds the process to signal.
func runningPID(flagPID int, pidFile string) (int, error) {
	if flagPID > 0 {
		return flagPID, nil
	}
	if s := os.Getenv("MAINPID"); s != "" {
		return strconv.Atoi(s)
	}
	if pidFile == "" {
		return 0, fmt.Errorf("the config has no admin token and no pid_file, and $MAINPID is unset; pass --pid")
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
