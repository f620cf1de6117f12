//go:build nokube

package cli

import (
	"context"
	"log/slog"

	"github.com/sturdyproxy/sturdy/internal/config"
)

const withKubernetes = false

// serveKubernetes refuses: this build left Kubernetes mode out.
func serveKubernetes(_ context.Context, _ *config.Config, file string, log *slog.Logger) int {
	log.Error("cannot start", "err", file+": kubernetes: this sturdy was built without Kubernetes mode (-tags nokube); use a build without that tag, such as the release binaries or the container image")
	return exitFail
}
