package doctor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCorpusFindings runs the doctor on every configuration of the corpus
// (../testdata/corpus: the deployment patterns of public projects, written
// for these tests) and compares its findings with testdata/corpus.golden:
// id, severity, where, title. Most of them run one application; a finding
// must be earned there.
func TestCorpusFindings(t *testing.T) {
	dirs, err := filepath.Glob("../testdata/corpus/*")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("# sturdy doctor nginx on the corpus; regenerate with: go test ./internal/adapt/nginx/doctor -run TestCorpusFindings -update\n")
	for _, d := range dirs {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			continue
		}
		main := filepath.Join(d, "main.conf")
		if _, err := os.Stat(main); err != nil {
			main = filepath.Join(d, "nginx.conf")
		}
		rep, err := Run(context.Background(), Input{Config: main})
		if err != nil {
			t.Errorf("%s: %v", d, err)
			continue
		}
		fmt.Fprintf(&b, "\n%s: %d high, %d medium, %d low\n", filepath.Base(d), rep.Summary.High, rep.Summary.Medium, rep.Summary.Low)
		for _, f := range rep.Findings {
			fmt.Fprintf(&b, "  %-6s %s %s: %s\n", f.Severity, f.ID, strings.TrimPrefix(f.Pos(), "../testdata/corpus/"), f.Title)
		}
	}
	golden(t, "corpus.golden", []byte(b.String()))
}

// An ingress-nginx config: Lua balances upstream_balancer, and the
// Connection header is empty for ordinary requests (a map), so keepalive
// works; the placeholder server is not a pool that can empty.
func TestIngressNginxIsNotNoise(t *testing.T) {
	rep := runCase(t, "ingress-nginx")
	for _, f := range rep.Findings {
		switch f.ID {
		case "keepalive-without-http11", "keepalive-oversized", "default-server-no-fallback":
			t.Errorf("false finding on an ingress-nginx config: %s: %s", f.ID, f.Title)
		}
	}
}
