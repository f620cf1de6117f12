package translate

import (
	"strings"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/ops/lint"
)

// An imported nginx upstream with backup servers becomes a pool and its
// fallback pool; `sturdy check` must not call the fallback unused.
func TestImportedBackupPoolIsNotReportedUnused(t *testing.T) {
	src := "http { upstream u { server 10.0.0.1:80; server 10.0.0.2:80; server 10.0.0.3:80 backup; } " +
		"server { listen 8080; server_name a.example; location / { proxy_pass http://u; } } }"
	cfg, err := nginx.Parse("t.conf", []byte(src), nginx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Translate(nginx.NewSite(cfg), Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(res.YAML, "t.yaml")
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, res.YAML)
	}
	if !strings.Contains(string(res.YAML), "u-backup") {
		t.Fatalf("no backup pool in:\n%s", res.YAML)
	}
	for _, w := range lint.Check(c) {
		if strings.Contains(w.Error(), "not used") {
			t.Errorf("%v\n%s", w, res.YAML)
		}
	}
}
