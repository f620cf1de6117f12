package drill

import (
	"strconv"
	"strings"
	"time"
)

// clientTimeout bounds every drill request that has no reason to wait
// longer: a client that gets nothing in 3s has been failed.
const clientTimeout = 3 * time.Second

// yamlHosts renders addresses as a YAML flow list of pool hosts.
func yamlHosts(addrs []string) string {
	parts := make([]string, len(addrs))
	for i, a := range addrs {
		parts[i] = `{ addr: "` + a + `" }`
	}
	return "[ " + strings.Join(parts, ", ") + " ]"
}

// nginxServers renders addresses as the server lines of an upstream block.
func nginxServers(addrs []string, params string) string {
	var b strings.Builder
	for _, a := range addrs {
		b.WriteString("    server " + a)
		if params != "" {
			b.WriteString(" " + params)
		}
		b.WriteString(";\n")
	}
	return b.String()
}

// nginxDuration renders d in nginx's time syntax ("300ms", "2s").
func nginxDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}
