package kube

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file without a kubernetes section is refused before any cluster is
// asked, with an error that names the command of Kubernetes mode (no
// command has a --kubernetes flag); so is a file that cannot be read.
func TestNewFileServerNeedsAKubernetesSection(t *testing.T) {
	f := filepath.Join(t.TempDir(), "sturdy.yaml")
	os.WriteFile(f, []byte("admin: { listen: \"off\" }\nlisteners: [ { name: web, listen: 127.0.0.1:0 } ]\nroutes: [ { name: a, default: true, pool: web } ]\npools: [ { name: web, hosts: [ { addr: \"127.0.0.1:9\" } ] } ]\n"), 0o644)
	log := slog.New(slog.DiscardHandler)
	_, err := NewFileServer(f, log, nil)
	if err == nil || !strings.Contains(err.Error(), f+": no kubernetes section; Kubernetes mode (sturdy-gateway run) needs one") || strings.Contains(err.Error(), "--kubernetes") {
		t.Errorf("got %v; want the file named, and sturdy-gateway run", err)
	}
	if _, err := NewFileServer(f+".gone", log, nil); err == nil || !strings.Contains(err.Error(), f+".gone: cannot read config") {
		t.Errorf("a missing file: %v", err)
	}
}
