package config

import (
	"runtime"
	"testing"
	"time"
)

func TestProtocolKeysAndDefaults(t *testing.T) {
	c, err := Load("testdata/protocols.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	plain, tls := c.Listeners[0], c.Listeners[1]
	if !plain.H2C || plain.ProxyProtocol != ProxyProtocolRequired || plain.HTTP3 != nil {
		t.Errorf("plain listener: h2c %v, proxy_protocol %q, http3 %v", plain.H2C, plain.ProxyProtocol, plain.HTTP3)
	}
	if h := tls.HTTP3; h == nil || h.Listen != tls.Listen || h.AltSvcMaxAge.D() != 24*time.Hour || h.ZeroRTT {
		t.Errorf("http3: {} defaults: got %+v; want the listener's address, 24h, no 0-RTT", h)
	}
	grpc, h2 := c.Pools[0], c.Pools[1]
	if grpc.Protocol != ProtocolH2C || grpc.MaxStreamsPerConn != DefaultMaxStreamsPerConn {
		t.Errorf("grpc pool: protocol %q, streams %d", grpc.Protocol, grpc.MaxStreamsPerConn)
	}
	if a := grpc.Health.Active; a.Type != CheckGRPC || a.Path != GRPCHealthPath || a.GRPCService != "echo.Echo" {
		t.Errorf("grpc check: %+v", a)
	}
	if h2.Protocol != ProtocolH2 || h2.MaxStreamsPerConn != 20 {
		t.Errorf("h2 pool: protocol %q, streams %d", h2.Protocol, h2.MaxStreamsPerConn)
	}
	// The defaults of a config that names none of the new keys.
	d, err := Parse([]byte("listeners: [ { name: a, listen: 127.0.0.1:0 } ]\nroutes: [ { name: r, default: true, pool: p } ]\npools: [ { name: p, hosts: [ { addr: 127.0.0.1:1 } ], health: { active: { path: /h } } } ]\n"), "d.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if l, p := d.Listeners[0], d.Pools[0]; l.H2C || l.ProxyProtocol != ProxyProtocolOff || p.Protocol != ProtocolHTTP1 || p.MaxStreamsPerConn != 0 || p.Health.Active.Type != CheckHTTP {
		t.Errorf("defaults: listener %+v, pool protocol %q streams %d check %q", l, p.Protocol, p.MaxStreamsPerConn, p.Health.Active.Type)
	}
	// Upgrades: WebSocket unless the route says otherwise; [] is none.
	if up := d.Routes[0].Upgrades; len(up) != 1 || up[0] != UpgradeWebSocket {
		t.Errorf("default upgrades %q, want [websocket]", up)
	}
	none, err := Parse([]byte("listeners: [ { name: a, listen: 127.0.0.1:0 } ]\nroutes: [ { name: r, default: true, pool: p, upgrades: [] } ]\npools: [ { name: p, hosts: [ { addr: 127.0.0.1:1 } ] } ]\n"), "n.yaml")
	if err != nil || len(none.Routes[0].Upgrades) != 0 {
		t.Errorf("upgrades: [] gives %q, %v", none.Routes[0].Upgrades, err)
	}
	// The front end: native where it serves, net/http where it does not
	// (TLS, PROXY headers, other systems).
	native := FrontendNetHTTP
	if runtime.GOOS == "linux" {
		native = FrontendNative
	}
	for _, tc := range []struct {
		l    Listener
		want string
	}{
		{d.Listeners[0], native},
		{plain, FrontendNetHTTP},
		{tls, FrontendNetHTTP},
	} {
		if tc.l.Frontend != tc.want {
			t.Errorf("listener %s: frontend %q, want %q", tc.l.Name, tc.l.Frontend, tc.want)
		}
	}
}
