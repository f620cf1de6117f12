package config

import (
	"fmt"
	"strings"
)

// srvHost checks a host given as an SRV name.
func (v *validator) srvHost(hp string, h Host, seen map[string]int, j int) {
	if h.Addr != "" {
		v.errorf(hp+".srv", "both addr and srv are set; a host is either an address or an SRV name")
	}
	if v.c.Has(hp + ".weight") {
		v.errorf(hp+".weight", "an SRV host takes its weights from its records; remove weight")
	}
	name := strings.TrimSuffix(h.SRV, ".")
	if name == "" || strings.ContainsAny(name, " /\\:") || strings.Contains(name, "..") {
		v.errorf(hp+".srv", "invalid SRV name %q; expected a name like _http._tcp.web.service.consul", h.SRV)
		return
	}
	if k, dup := seen["srv:"+name]; dup {
		v.errorf(hp+".srv", "%s is already listed as hosts[%d] of this pool", h.SRV, k)
	}
	seen["srv:"+name] = j
}

func (v *validator) dns() {
	d := v.c.DNS
	if d.Hold < d.Refresh {
		v.errorf("dns.hold", "hold %s is shorter than refresh %s: the last good addresses would expire between two lookups", d.Hold, d.Refresh)
	}
	for i, s := range d.Servers {
		v.checkAddr(fmt.Sprintf("dns.servers[%d]", i), s)
	}
}
