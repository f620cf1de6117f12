package httphead

import (
	"strconv"
	"testing"
)

// Unhex agrees with strconv on every byte.
func TestUnhexAgreesWithStrconvOnEveryByte(t *testing.T) {
	for c := range 256 {
		want := -1
		if v, err := strconv.ParseUint(string(rune(c)), 16, 8); err == nil && c < 0x80 {
			want = int(v)
		}
		if got := Unhex(byte(c)); got != want {
			t.Errorf("Unhex(%#x) = %d, want %d", c, got, want)
		}
	}
}
