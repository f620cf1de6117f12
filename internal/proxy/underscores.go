package proxy

import (
	"net/http"
	"strings"
)

// dropUnderscored deletes the header fields whose names hold "_" and
// reports whether there were any. CGI, WSGI, Rack and PHP hand a backend
// its header fields as variables with "-" turned into "_", so that
// X_Real_IP and the X-Real-IP sturdy sets become one HTTP_X_REAL_IP and
// the client's wins or joins it. nginx drops them (underscores_in_headers
// off); so does sturdy, at the edge, so that routing, access rules and
// the backend all see the same header. A header without one costs a scan
// of its names and no allocation.
func dropUnderscored(h http.Header) bool {
	dropped := false
	for k := range h {
		if strings.IndexByte(k, '_') >= 0 {
			delete(h, k) // deleting while ranging is allowed
			dropped = true
		}
	}
	return dropped
}
