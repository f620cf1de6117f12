// Package cli implements sturdy's subcommands, their flags and exit codes.
// Each command is a function from arguments to an exit code, so tests call
// them directly with buffers for output.
package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and found a problem (invalid config, failed drill)
	exitUsage = 2 // the command line was wrong
)

type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() map[string]command {
	return map[string]command{
		"run":         {"serve with a config file until SIGINT/SIGTERM (SIGHUP reloads)", cmdRun},
		"check":       {"validate a config file and print errors and warnings", cmdCheck},
		"validate":    {"alias of check", cmdCheck},
		"demo":        {"start three demo backends and sturdy in front of them", cmdDemo},
		"healthcheck": {"query /readyz and exit 0 when ready (for container HEALTHCHECK)", cmdHealthcheck},
		"version":     {"print the version", cmdVersion},
		"doctor":      {"diagnose an nginx config and its logs against the five incidents", cmdDoctor},
		"import":      {"translate an nginx config into a sturdy config", cmdImport},
		"drill":       {"re-enact the five incidents on loopback and report what clients saw", cmdDrill},
	}
}

// Run runs the subcommand named by args[0] and returns the process exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout, cmds)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "sturdy: unknown command %q\n\n", args[0])
		usage(stderr, cmds)
		return exitUsage
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer, cmds map[string]command) {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("usage: sturdy COMMAND [flags]\n\ncommands:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-12s %s\n", n, cmds[n].summary)
	}
	b.WriteString("\nRun 'sturdy COMMAND -h' for a command's flags.\n")
	io.WriteString(w, b.String())
}
