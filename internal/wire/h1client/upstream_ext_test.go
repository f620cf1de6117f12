package h1client_test

import (
	"net/http"

	"github.com/sturdyproxy/sturdy/internal/proxy"
	"github.com/sturdyproxy/sturdy/internal/wire/h1client"
)

// The client is a drop-in for the proxy's seam and for net/http's.
var (
	_ proxy.Upstream    = (*h1client.Client)(nil)
	_ http.RoundTripper = (*h1client.Client)(nil)
)
