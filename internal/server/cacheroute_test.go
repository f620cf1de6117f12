package server

import (
	"io"
	"net/http"
	"testing"
)

const cacheRouteConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - { name: cached, path: /cached/, pool: web, cache: { enabled: true } }
  - { name: plain, default: true, pool: web }
pools:
  - name: web
    hosts: [ { addr: "{{b}}" } ]
`

// startCacheRouteSturdy runs sturdy with one cached and one uncached route
// on the same backend; each test compares /cached/... with /....
func startCacheRouteSturdy(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	b := backend(t, "127.1.0.1", h)
	_, url, _ := startSturdy(t, parseConfig(t, cacheRouteConfig, map[string]string{"b": addr(b)}))
	return url
}

// TestCachedRouteForwardsTrailers: trailers reach the client on a route
// with cache.enabled as on one without (they used to be dropped there), on
// every request, since such a response is passed through and not stored.
func TestCachedRouteForwardsTrailers(t *testing.T) {
	url := startCacheRouteSturdy(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=60")
		w.Header().Set("Trailer", "Grpc-Status")
		io.WriteString(w, "payload")
		w.Header().Set("Grpc-Status", "0")
	})
	for _, path := range []string{"/plain", "/cached/a", "/cached/a"} {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(body) != "payload" || resp.Trailer.Get("Grpc-Status") != "0" {
			t.Errorf("%s: body %q (%v), trailers %v, Cache-Status %q", path, body, err, resp.Trailer, resp.Header.Get("Cache-Status"))
		}
	}
}

// TestCachedRouteNeverSniffsContentType: a response without Content-Type
// gets none on a route with cache.enabled, from the origin and from the
// store (it used to come back as text/html).
func TestCachedRouteNeverSniffsContentType(t *testing.T) {
	url := startCacheRouteSturdy(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = nil
		w.Header().Set("Cache-Control", "max-age=60")
		io.WriteString(w, "<html><body>no type given</body></html>")
	})
	for _, path := range []string{"/plain", "/cached/b", "/cached/b"} {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if ct, ok := resp.Header["Content-Type"]; ok {
			t.Errorf("%s: Content-Type %q, want none; Cache-Status %q", path, ct, resp.Header.Get("Cache-Status"))
		}
	}
}
