package upstream_test

import (
	"net/http"

	"github.com/sturdyproxy/sturdy/internal/proxy"
	"github.com/sturdyproxy/sturdy/internal/upstream"
)

// The client is a drop-in for the proxy's seam and for net/http's.
var (
	_ proxy.Upstream    = (*upstream.Client)(nil)
	_ http.RoundTripper = (*upstream.Client)(nil)
)
