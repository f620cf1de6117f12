package kube

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// client-go's lines (klog's) go through the logger sturdy-gateway serves
// with, so that a JSON log stays JSON.
func TestClientGoLogsThroughSturdysLogger(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	NewFileServer(filepath.Join(t.TempDir(), "missing.yaml"), log, nil)
	t.Cleanup(func() { klog.ClearLogger() })
	klog.Info("from client-go")
	klog.Flush()
	line, _, _ := strings.Cut(buf.String(), "\n")
	var rec map[string]any
	if err := json.Unmarshal([]byte(line), &rec); err != nil || !strings.Contains(line, "from client-go") {
		t.Fatalf("klog's line did not go through the logger: %q (%v)", buf.String(), err)
	}
}
