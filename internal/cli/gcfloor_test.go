package cli

import "testing"

// The floor is held by default and left to the operator who tunes the
// collector.
func TestGCFloorYieldsToOperatorTuning(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	if b := holdGCFloor(); len(b) != gcFloorBytes {
		t.Fatalf("default: a floor of %d bytes, want %d", len(b), gcFloorBytes)
	}
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "200")
			if b := holdGCFloor(); b != nil {
				t.Fatalf("with %s set: a floor of %d bytes, want none", env, len(b))
			}
		})
	}
}
