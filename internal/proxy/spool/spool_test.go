package spool

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The directory is made 0700 (and made so when looser), a crash's
// leftovers are removed, bodies are files no listing shows, readable
// from the start as often as needed, and the bound holds across files
// until they close.
func TestSpool(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bodies")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, prefix+"leftover"), []byte("old"), 0o600)
	os.WriteFile(filepath.Join(dir, "other"), []byte("not ours"), 0o600)
	d, err := Open(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("mode %v, want 0700", fi.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(dir, prefix+"leftover")); !os.IsNotExist(err) {
		t.Errorf("a leftover body survived Open: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "other")); err != nil {
		t.Errorf("a file that is not a body was removed: %v", err)
	}
	a, err := d.Create()
	if err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the directory lists %v: a body file is visible", entries)
	}
	if fi, _ := a.f.Stat(); fi.Mode().Perm() != 0o600 {
		t.Errorf("a body file's mode %v, want 0600", fi.Mode().Perm())
	}
	a.Write([]byte("hello"))
	b, _ := d.Create()
	if _, err := b.Write([]byte("world!")); !errors.Is(err, ErrFull) {
		t.Errorf("past the bound: %v, want ErrFull", err)
	}
	if _, err := b.Write([]byte("world")); err != nil || d.Used() != 10 {
		t.Errorf("up to the bound: %v, used %d", err, d.Used())
	}
	for range 2 {
		got, _ := io.ReadAll(a.Reader())
		if string(got) != "hello" {
			t.Errorf("read back %q", got)
		}
	}
	a.Close()
	b.Close()
	if d.Used() != 0 {
		t.Errorf("used %d after closing every file", d.Used())
	}
	if _, err := Open(filepath.Join(dir, "other"), 1); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file as the directory: %v", err)
	}
}
