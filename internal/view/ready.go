package view

import (
	"fmt"
	"time"
)

// The reasons /readyz gives (Status.NotReady) that another view must
// recognise: the status page shows each under the cause it comes from (a
// route's failing hosts, an expired certificate, the shutdown) instead of
// as one more "Not ready".

// NotReadyDraining is the reason while sturdy shuts down.
const NotReadyDraining = "shutting down: draining in-flight requests"

// NotReadyRoute is the reason for a counted route that has nothing left
// but its sorry page.
func NotReadyRoute(r Route) string {
	return fmt.Sprintf("route %s: no backend can answer (pool %s is empty); only the sorry page is left", r.Name, r.Pool)
}

// NotReadyCertificate is the reason for an expired certificate, when
// admin.expired_certificate_not_ready asks for it.
func NotReadyCertificate(c Certificate) string {
	return fmt.Sprintf("certificate of listener %s (%s) expired at %s", c.Listener, c.Names, c.NotAfter.UTC().Format(time.RFC3339))
}
