package cli

import (
	"context"
	"io"
	"log/slog"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/server"
)

// KubeServer builds Kubernetes mode's server for the config file at path:
// the file's config plus what the cluster's objects translate to, the file
// re-read on reload; opts are the process's server options (systemd
// notification, inherited sockets). cmd/sturdy-gateway passes
// internal/adapt/kube's NewFileServer in, so that this package, and with
// it the sturdy command, links no Kubernetes library: client-go would
// double sturdy's binary and its resident memory, in file mode too.
type KubeServer func(path string, log *slog.Logger, opts []server.Option) (*server.Server, error)

// RunGateway runs the sturdy-gateway subcommand named by args[0], whose
// run serves Kubernetes mode through kube, and returns the process exit
// code.
func RunGateway(ctx context.Context, args []string, stdout, stderr io.Writer, kube KubeServer) int {
	return gateway(kube).run(ctx, args, stdout, stderr)
}

// gateway is the sturdy-gateway command's program: sturdy's run, check,
// healthcheck and version, for a config with a kubernetes section. It has
// no reload (SIGHUP and the admin API's reload do that job in a pod), no
// tools for a workstation (demo, drill, doctor, import) and no man page
// or completions: it runs in a container.
func gateway(kube KubeServer) *program {
	p := &program{
		name: "sturdy-gateway",
		about: `sturdy as a Gateway API and Ingress controller: the same proxy, with
listeners, routes and pools from the cluster's Gateways, HTTPRoutes,
GRPCRoutes and Ingresses beside the config file's own (docs/kubernetes.md).`,
		examples: []string{"sturdy-gateway check -c /etc/sturdy/sturdy.yaml", "sturdy-gateway run -c /etc/sturdy/sturdy.yaml"},
		kube:     kube,
	}
	p.commands = []*command{
		{
			name:    "run",
			summary: "serve the config file and the cluster's objects until SIGINT or SIGTERM; SIGHUP reloads the file",
			long: `Serves the config file's listeners, routes and pools and those its
kubernetes section makes of the cluster's Gateways, HTTPRoutes, GRPCRoutes
and Ingresses, re-translated as they change. /readyz says not ready until
the first sync is applied. The API server is reached as kubernetes.kubeconfig
says: the pod's service account in a cluster, else $KUBECONFIG. On SIGINT or
SIGTERM it stops accepting, lets requests in flight finish within
shutdown_grace, and exits. On SIGHUP it re-reads the file; an invalid file
is refused and the running config stays.`,
			examples: []string{"sturdy-gateway run -c /etc/sturdy/sturdy.yaml", "KUBECONFIG=~/.kube/config sturdy-gateway run -c sturdy.yaml"},
			run:      p.cmdRun,
		},
		p.checkCommand(),
		p.healthcheckCommand(),
		p.versionCommand(),
	}
	return p
}

// load reads and validates a config file for this program: sturdy serves a
// file without a kubernetes section, sturdy-gateway one with it. Each
// refuses the other's file, rather than serving a part of it.
func (p *program) load(file string) (*config.Config, error) {
	cfg, err := config.Load(file)
	if err != nil {
		return nil, err
	}
	switch {
	case p.kube == nil && cfg.Kubernetes != nil:
		return nil, config.ErrorList{{File: file, Line: cfg.Line("kubernetes"), Path: "kubernetes",
			Msg: "Kubernetes mode is the sturdy-gateway command: serve this file with sturdy-gateway run, or remove the section (docs/kubernetes.md)"}}
	case p.kube != nil && cfg.Kubernetes == nil:
		return nil, config.ErrorList{{File: file, Path: "kubernetes",
			Msg: "no kubernetes section: sturdy-gateway needs one to know what to serve from the cluster (docs/kubernetes.md); a file without it is served by sturdy run"}}
	}
	return cfg, nil
}
