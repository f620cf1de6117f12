package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/demo"
	"github.com/sturdyproxy/sturdy/internal/server"
)

func (p *program) cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := p.newFlags("demo", stderr)
	printConfig := fs.Bool("print-config", false, "print the embedded demo config and exit")
	listen := fs.String("listen", "127.0.0.1:8080", "sturdy's listener")
	adminAddr := fs.String("admin", "127.0.0.1:9901", "the admin listener (status page, metrics, runtime API)")
	backends := fs.String("backends", strings.Join(demo.BackendAddrs, ","), "the three demo backends' addresses, comma-separated")
	visitors := fs.Int("visitors", len(demo.VisitorAddrs), "simulated visitors sending about a request a second each (0: none)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *printConfig {
		stdout.Write(demo.Config)
		return exitOK
	}
	addrs := demo.Addrs{Listen: *listen, Admin: *adminAddr, Backends: strings.Split(*backends, ",")}
	token := demo.NewToken()
	cfg, err := demo.Configure(addrs, token)
	if err != nil {
		printConfigError(stderr, err)
		return exitFail
	}
	n := *visitors
	if n == 0 {
		n = -1
	}
	lab, err := demo.New(demo.Options{Listen: *listen, Backends: addrs.Backends, Visitors: n})
	if err != nil {
		fmt.Fprintf(stderr, "sturdy demo: %v\nStop whatever uses that port, or pick others with --listen, --admin and --backends.\n", err)
		return exitFail
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { lab.Run(ctx) })
	defer wg.Wait()
	defer cancel()
	printDemoIntro(stdout, cfg, lab, token, *visitors)
	return serve(ctx, cfg, newLogger(cfg.Log, stderr), func() (*config.Config, error) {
		return demo.Configure(addrs, token)
	}, server.WithDemo(lab.Handler()))
}

func printDemoIntro(w io.Writer, cfg *config.Config, lab *demo.Lab, token string, visitors int) {
	listen, admin := cfg.Listeners[0].Listen, cfg.Admin.Listen
	fmt.Fprintf(w, `sturdy demo: three backends (b1, b2, b3 on %s), sturdy in front of them on %s.

Try:
  curl -i http://%[2]s/                 round robin over all three backends
  curl -i http://%[2]s/api/hello        least connections over b1 and b2
  curl -N http://%[2]s/stream           server-sent events, streamed as they come
  curl -i http://%[2]s/cached/page      through the cache: see Cache-Status and Age

The status page:  http://%[3]s/status#token=%[4]s
                  (the link carries the admin token, so the page's demo buttons work)
Metrics:          http://%[3]s/metrics
`, strings.Join(lab.BackendAddrs(), ", "), listen, admin, token)
	if visitors > 0 {
		fmt.Fprintf(w, "Visitors:         %d simulated clients (%s) send about a request a second each.\n",
			visitors, strings.Join(demo.VisitorAddrs[:min(visitors, len(demo.VisitorAddrs))], ", "))
	}
	fmt.Fprintf(w, `
Break things and watch the status page: every backend has a WAF in front
that refuses the scanner %s, and each can be made %s.
The admin token for this run is %s:

  T=%[3]s
`, demo.ScannerAddr, modeNames(), token)
	for _, c := range lab.Commands(admin) {
		fmt.Fprintf(w, "  %-s\n      # %s\n", c.Run, c.What)
	}
	fmt.Fprint(w, `
The config it runs: sturdy demo -print-config
Stop with Ctrl-C.

`)
}

func modeNames() string {
	var names []string
	for _, m := range demo.Modes[1:] {
		names = append(names, m.Name)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
