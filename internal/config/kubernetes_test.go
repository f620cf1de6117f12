package config

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The Kubernetes source finishes a config that Parse already defaulted
// (the file's part) with its own entries appended: finishing again must
// leave every defaulted value as it was.
func TestFinishChangesNothingOnALoadedConfig(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.good.yaml")
	files = append(files, "../../examples/basic.yaml", "../../examples/behind-load-balancer.yaml")
	for _, f := range files {
		a, err := Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		b, _ := Load(f)
		if err := b.Finish(); err != nil {
			t.Fatalf("%s: Finish: %v", f, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: Finish changed a loaded config", f)
		}
	}
}

func TestKubernetesSection(t *testing.T) {
	good := `
admin: { listen: 127.0.0.1:9901 }
kubernetes:
  ports: [ { port: 80, listen: 0.0.0.0:8080 }, { port: 443, listen: 0.0.0.0:8443 } ]
  publish_service: sturdy/sturdy
`
	cfg, err := Parse([]byte(good), "k.yaml")
	if err != nil {
		t.Fatalf("a kubernetes config with no listeners, routes or pools of its own: %v", err)
	}
	k := cfg.Kubernetes
	if k.ControllerName != DefaultControllerName || k.IngressClassName() != "sturdy" || k.Lease.Name != DefaultLeaseName {
		t.Errorf("defaults: %+v", k)
	}
	if got := k.Listen(80); got != "0.0.0.0:8080" {
		t.Errorf("Listen(80) = %s", got)
	}
	if got := k.Listen(9000); got != "0.0.0.0:9000" {
		t.Errorf("Listen(9000) = %s", got)
	}
	bad := `
kubernetes:
  controller_name: "not a path"
  ingress_class: "Bad_Class"
  ports: [ { port: 80, listen: 0.0.0.0:8080 }, { port: 80, listen: "" } ]
  publish_service: nosuchform
`
	_, err = Parse([]byte(bad), "k.yaml")
	if err == nil {
		t.Fatal("a bad kubernetes section was accepted")
	}
	for _, want := range []string{"kubernetes.controller_name", "kubernetes.ingress_class", "kubernetes.ports[1].port: port 80 is already mapped", "kubernetes.ports[1].listen: missing", "kubernetes.publish_service"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

func TestGatewayAddresses(t *testing.T) {
	cfg, err := Parse([]byte(`
kubernetes:
  bind_address: 10.0.0.5
  ports: [ { port: 80, listen: 10.0.0.5:8080 } ]
  gateway_addresses: [10.0.5.0/30, 10.0.5.1, 10.0.6.9]
`), "k.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range cfg.Kubernetes.GatewayPool() {
		got = append(got, a.String())
	}
	if want := "10.0.5.0 10.0.5.1 10.0.5.2 10.0.5.3 10.0.6.9"; strings.Join(got, " ") != want {
		t.Errorf("pool = %v; want %s (each address once, in order)", got, want)
	}
	_, err = Parse([]byte(`
kubernetes:
  ports: [ { port: 80, listen: 0.0.0.0:8080 } ]
  gateway_addresses: [10.0.0.0/8, nonsense]
`), "k.yaml")
	for _, want := range []string{"kubernetes.gateway_addresses", "kubernetes.bind_address", "kubernetes.ports[0].listen"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}
