package testutil

import (
	"os"
	"testing"
)

// Golden compares got with the content of file; with update set it
// rewrites the file first (go test -update).
func Golden(t testing.TB, got, file string, update bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s\n--- got:\n%s--- want:\n%s", file, got, want)
	}
}
