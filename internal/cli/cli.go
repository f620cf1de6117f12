// Package cli implements the repository's commands: sturdy (Run) and
// sturdy-gateway (RunGateway, Kubernetes mode), their subcommands, flags
// and exit codes. Each subcommand is a function from arguments to an exit
// code, so tests call them directly with buffers for output. A program's
// command table is the one definition that its help, shell completions
// and man page are generated from.
package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and found a problem (invalid config, failed drill)
	exitUsage = 2 // the command line was wrong
)

// runFunc runs one command with the arguments after its name.
type runFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// command is one subcommand. Its flags are those its run function defines
// with newFlags; describe reads them without running the command.
type command struct {
	name     string
	aliases  []string
	args     string // what follows the flags in the usage line, e.g. "[scenario...]"
	summary  string // one line, no final period
	long     string // optional paragraphs after the summary
	more     func() string
	examples []string
	run      runFunc
}

// program is one command of the repository: its name as typed, the
// paragraph its help opens with, and its subcommands in the order help
// shows them. sturdy and sturdy-gateway share the subcommands' code and
// the help's shape; each has its own table.
type program struct {
	name     string
	about    string
	examples []string
	commands []*command
	// kube builds Kubernetes mode's server: set for sturdy-gateway, nil
	// for sturdy, which links no Kubernetes library (gateway.go).
	kube KubeServer
}

// sturdy is the sturdy command's program.
func sturdy() *program {
	p := &program{
		name:     "sturdy",
		about:    "A reverse proxy and load balancer that attributes every failure to its\nreal cause before acting on it.",
		examples: []string{"sturdy check -c /etc/sturdy/sturdy.yaml", "sturdy run -c /etc/sturdy/sturdy.yaml"},
	}
	p.commands = []*command{
		{
			name:    "run",
			summary: "serve with a config file until SIGINT or SIGTERM; SIGHUP reloads it",
			long: `Serves the listeners of the config file. On SIGINT or SIGTERM it stops
accepting, lets requests in flight finish within shutdown_grace, and exits.
On SIGHUP it re-reads the file; an invalid file is refused and the running
config stays. A file with a kubernetes section is refused: Kubernetes mode
is the sturdy-gateway command.`,
			examples: []string{"sturdy run -c /etc/sturdy/sturdy.yaml", "sturdy run            # reads ./sturdy.yaml"},
			run:      p.cmdRun,
		},
		{
			name:    "reload",
			summary: "check a config file, make the running sturdy reload it, and report the outcome",
			long: `Validates the file as check does, then asks the running sturdy to reload:
through the admin API when the config has an admin token, else with SIGHUP
to the process named by --pid, $MAINPID (systemd's ExecReload sets it) or
pid_file, confirmed through the admin listener's status when there is one.
Exits 1 when the file is invalid or the running sturdy refused it; the
running config then stays.`,
			examples: []string{"sturdy reload -c /etc/sturdy/sturdy.yaml", "sturdy reload -c sturdy.yaml --pid 4242"},
			run:      p.cmdReload,
		},
		{
			name:    "reopen",
			summary: "make the running sturdy reopen its log files (after logrotate)",
			long: `Sends SIGUSR1 to the process named by --pid, $MAINPID or the config's
pid_file; sturdy then reopens its access log, as nginx does on its reopen signal.`,
			examples: []string{"sturdy reopen -c /etc/sturdy/sturdy.yaml", "sturdy reopen --pid 4242"},
			run:      p.cmdReopen,
		},
		p.checkCommand("sturdy check -q -c sturdy.yaml && systemctl reload sturdy"),
		{
			name:    "demo",
			summary: "start three demo backends and sturdy in front of them, with controls to break them",
			long: `Runs three backends with a WAF in front of each, simulated visitors, and
sturdy in front of them. The status page's demo panel, or the curl lines the
demo prints with a fresh admin token, make a backend slow, 503, resetting or
blackholed, start a scanner the WAFs refuse, and send malformed URLs. Needs
ports 8080, 9901 and 9101-9103 on 127.0.0.1 unless --listen, --admin and
--backends say otherwise. Stop it with Ctrl-C.`,
			examples: []string{"sturdy demo", "sturdy demo --listen 127.0.0.1:18080 --admin 127.0.0.1:19901", "sturdy demo --print-config > sturdy.yaml"},
			run:      p.cmdDemo,
		},
		p.healthcheckCommand(),
		{
			name:    "doctor",
			args:    "nginx",
			summary: "diagnose an nginx config and its logs against the five incidents",
			long: `Checks an nginx config for the settings behind the five incidents sturdy
was built from, and explains outages from its logs. Exits 1 when a
high-severity finding is reported.`,
			examples: []string{"sturdy doctor nginx", "sturdy doctor nginx -c ./nginx.conf --error-log /var/log/nginx/error.log --json"},
			run:      p.cmdDoctor,
		},
		{
			name:    "import",
			args:    "nginx",
			summary: "translate an nginx config into a sturdy config",
			long: `Translates upstreams, servers, locations with proxy_pass and listeners;
what cannot be translated is listed, with file:line, at the top of the
output.`,
			examples: []string{"sturdy import nginx -c /etc/nginx/nginx.conf -o sturdy.yaml"},
			run:      p.cmdImport,
		},
		{
			name:    "drill",
			args:    "[scenario...]",
			summary: "re-enact the five incidents on loopback and report what clients saw",
			long: `Runs fake backends, a WAF, Node-like and blackholed hosts and a caching
origin on loopback, with clients from distinct 127.x addresses. With no
scenario it runs them all; a name without "/variant" includes its variants.
Exits 1 when a sturdy scenario fails (nginx failing is the comparison, not
a failure). See docs/drill.md.`,
			more:     drillScenarioList,
			examples: []string{"sturdy drill", "sturdy drill waf-scanner --against nginx", "sturdy drill -c sturdy.yaml --pool web"},
			run:      p.cmdDrill,
		},
		p.versionCommand(),
		{
			name:     "completion",
			args:     "bash|zsh|fish",
			summary:  "print a shell completion script",
			long:     `The script completes commands, flags, file arguments and drill scenarios.`,
			examples: []string{"source <(sturdy completion bash)", "sturdy completion zsh > \"${fpath[1]}/_sturdy\"", "sturdy completion fish > ~/.config/fish/completions/sturdy.fish"},
			run:      p.cmdCompletion,
		},
		{
			name:     "man",
			summary:  "print the sturdy(1) man page (roff)",
			examples: []string{"sturdy man | man -l -", "sturdy man | gzip > /usr/share/man/man1/sturdy.1.gz"},
			run:      p.cmdMan,
		},
	}
	return p
}

// checkCommand, healthcheckCommand and versionCommand are the commands
// both programs have, with the program's name in their text.
func (p *program) checkCommand(examples ...string) *command {
	return &command{
		name:    "check",
		aliases: []string{"validate"},
		args:    "[FILE]",
		summary: "validate a config file and print errors and warnings",
		long: `Prints every error as FILE:LINE: key.path: message and exits 1, or prints
a one-line summary and exits 0. Risky but valid settings print as warnings.
The file is -c's, or the one argument.`,
		examples: append([]string{p.name + " check -c /etc/sturdy/sturdy.yaml", p.name + " check sturdy.yaml"}, examples...),
		run:      p.cmdCheck,
	}
}

func (p *program) healthcheckCommand() *command {
	return &command{
		name:    "healthcheck",
		summary: "query /readyz and exit 0 when ready (for a container HEALTHCHECK)",
		long: `Exits 0 when the admin listener's /readyz answers 200, and 1 otherwise,
printing the reasons ` + p.name + ` gave.`,
		examples: []string{p.name + " healthcheck", p.name + " healthcheck -q --url http://127.0.0.1:9901/readyz"},
		run:      p.cmdHealthcheck,
	}
}

func (p *program) versionCommand() *command {
	return &command{
		name:     "version",
		summary:  "print the version, commit and Go version (also: " + p.name + " --version, -v)",
		examples: []string{p.name + " version", p.name + " --version"},
		run:      p.cmdVersion,
	}
}

// lookup returns the command called name (or one of its aliases), or nil.
func (p *program) lookup(name string) *command {
	for _, c := range p.commands {
		if c.name == name {
			return c
		}
		for _, a := range c.aliases {
			if a == name {
				return c
			}
		}
	}
	return nil
}

// Run runs the sturdy subcommand named by args[0] and returns the process
// exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return sturdy().run(ctx, args, stdout, stderr)
}

func (p *program) run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		p.usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 {
			c := p.lookup(args[1])
			if c == nil {
				fmt.Fprintf(stderr, "%s help: unknown command %q\n\n", p.name, args[1])
				p.usage(stderr)
				return exitUsage
			}
			p.writeHelp(stdout, c, describe(c))
			return exitOK
		}
		p.usage(stdout)
		return exitOK
	case "-v", "-version", "--version":
		return p.cmdVersion(ctx, args[1:], stdout, stderr)
	}
	c := p.lookup(args[0])
	if c == nil {
		fmt.Fprintf(stderr, "%s: unknown command %q\n\n", p.name, args[0])
		p.usage(stderr)
		return exitUsage
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

func (p *program) usage(w io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s COMMAND [flags]\n\n%s\n\ncommands:\n", p.name, p.about)
	for _, c := range p.commands {
		name := c.name
		if len(c.aliases) > 0 {
			name += ", " + strings.Join(c.aliases, ", ")
		}
		fmt.Fprintf(&b, "  %-18s %s\n", name, c.summary)
	}
	fmt.Fprintf(&b, `
flags:
  -h, --help         show this help
  -v, --version      print the version

Run '%[1]s help COMMAND' or '%[1]s COMMAND -h' for a command's flags.

examples:
`, p.name)
	for _, e := range p.examples {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	io.WriteString(w, b.String())
}
