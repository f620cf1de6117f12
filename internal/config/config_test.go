package config

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

var update = flag.Bool("update", false, "rewrite testdata/*.bad.want from the current output")

// Each testdata/NAME.bad.yaml is paired with NAME.bad.want, the exact
// output sturdy check prints for it: every error, FILE:LINE: key.path: message.
func TestBadConfigs(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.bad.yaml")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, err := Load(f)
			if err == nil {
				t.Fatal("config loaded; want errors")
			}
			testutil.Golden(t, err.Error()+"\n", strings.TrimSuffix(f, ".yaml")+".want", *update)
		})
	}
}

func TestGoodConfigDefaultsAndValues(t *testing.T) {
	c, err := Load("testdata/full.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Routes[0].Timeouts.Connect.D(); got != 750*time.Millisecond {
		t.Errorf("connect = %v", got)
	}
	if c.Routes[0].MaxBodyBytes != 1<<20 || c.Routes[1].MaxBodyBytes != DefaultMaxBodyBytes {
		t.Errorf("max body: %v %v", c.Routes[0].MaxBodyBytes, c.Routes[1].MaxBodyBytes)
	}
	if c.Routes[0].Hosts[0] != "api.example.com" {
		t.Errorf("hosts are lower-cased: %q", c.Routes[0].Hosts[0])
	}
	if c.Routes[1].Path != "/" || c.Routes[1].Timeouts.ResponseHeader.D() != DefaultResponseHeader {
		t.Errorf("route defaults not applied: %+v", c.Routes[1])
	}
	if c.Pools[0].Balance != BalanceRoundRobin || c.Pools[0].Hosts[1].Weight != 1 || c.Pools[0].Hosts[0].Weight != 3 {
		t.Errorf("pool defaults: %+v", c.Pools[0])
	}
	if c.Listeners[0].MaxHeaderBytes != 32<<10 || c.ShutdownGrace.D() != 20*time.Second {
		t.Errorf("listener/global: %+v %v", c.Listeners[0], c.ShutdownGrace)
	}
	if c.Line("routes[0].timeouts.connect") != 18 || c.Line("routes[1].timeouts.connect") != 20 {
		t.Errorf("lines: %d %d", c.Line("routes[0].timeouts.connect"), c.Line("routes[1].timeouts.connect"))
	}
	if c.Hash == "" {
		t.Error("no hash")
	}
}

func TestSizes(t *testing.T) {
	for in, want := range map[string]Size{"512": 512, "64KiB": 64 << 10, "10MiB": 10 << 20, "1GiB": 1 << 30, "2KB": 2000, "7 B": 7} {
		var z Size
		if err := z.decodeScalar(in); err != nil || z != want {
			t.Errorf("%q: got %v, %v; want %v", in, z, err, want)
		}
	}
	for _, in := range []string{"-1", "1.5MiB", "MiB", "99999999999GiB"} {
		var z Size
		if err := z.decodeScalar(in); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

// Bodies above buffer_request_body wait on disk unless a route says
// request_buffering: off (YAML 1.1's off, as nginx's users write it).
func TestRequestBuffering(t *testing.T) {
	c, err := Parse([]byte(`
listeners: [ { name: web, listen: "127.0.0.1:8080" } ]
routes:
  - { name: up, default: true, pool: web }
  - { name: stream, path: /s/, pool: web, request_buffering: off }
pools: [ { name: web, hosts: [ { addr: "127.0.0.1:9000" } ] } ]
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Routes[0].RequestBuffering || c.Routes[1].RequestBuffering {
		t.Errorf("request_buffering: default %v, off %v; want true, false", c.Routes[0].RequestBuffering, c.Routes[1].RequestBuffering)
	}
	if c.ClientBodyTemp.Path != DefaultClientBodyTempPath() || c.ClientBodyTemp.MaxSize != DefaultClientBodyTempMax {
		t.Errorf("client_body_temp defaults: %+v", c.ClientBodyTemp)
	}
}
