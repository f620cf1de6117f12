package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// cmdHealthcheck asks the admin listener's /readyz whether sturdy can
// answer properly (a live process is not enough to send it traffic,
// incident 004), or --url's endpoint: the image's HEALTHCHECK asks /livez,
// since replacing the container mends no backend. It exits 0 when the
// answer is 200 and 1 otherwise, printing the reasons sturdy gave.
func (p *program) cmdHealthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := p.newFlags("healthcheck", stderr)
	url := fs.String("url", "http://"+config.DefaultAdminListen+"/readyz", "readiness `URL` of the admin listener")
	timeout := fs.Duration("timeout", 2*time.Second, "give up after this long")
	quiet := fs.Bool("q", false, "print nothing when ready")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "%s healthcheck: %v\n", p.name, err)
		return exitUsage
	}
	req.Header.Set("Accept", "text/plain")
	// A fresh transport: no proxy from the environment (the admin listener
	// is local) and no kept-alive connection left behind.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "not ready: %v\n", err)
		return exitFail
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
	text := strings.TrimSpace(string(body))
	if resp.StatusCode == http.StatusOK {
		if !*quiet {
			fmt.Fprintln(stdout, text)
		}
		return exitOK
	}
	if text == "" {
		text = "not ready: " + resp.Status
	}
	fmt.Fprintf(stderr, "%s\n", text)
	return exitFail
}
