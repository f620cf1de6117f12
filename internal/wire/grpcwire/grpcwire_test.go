package grpcwire

import (
	"testing"
	"time"
)

func TestTimeoutRoundTrips(t *testing.T) {
	for _, d := range []time.Duration{1, 999, time.Microsecond, 1500 * time.Millisecond, 99999999, 100000000, 3 * time.Second, 40 * time.Hour, 200000 * time.Hour} {
		s := FormatTimeout(d)
		got, ok := ParseTimeout(s)
		if !ok || got < d {
			t.Errorf("FormatTimeout(%v) = %q, parsed back as %v, %v: want at least %v", d, s, got, ok, d)
		}
		if len(s) > maxDigits+1 {
			t.Errorf("FormatTimeout(%v) = %q: more than 8 digits", d, s)
		}
	}
	if FormatTimeout(-time.Second) != "1n" {
		t.Error("a past deadline is not 1n")
	}
}

func TestParseTimeoutRefusesWhatIsNotOne(t *testing.T) {
	for _, v := range []string{"", "5", "S", "123456789S", "-1S", "1x", "1.5S", " 1S"} {
		if _, ok := ParseTimeout(v); ok {
			t.Errorf("ParseTimeout(%q) accepted", v)
		}
	}
	if d, ok := ParseTimeout("250m"); !ok || d != 250*time.Millisecond {
		t.Errorf("250m: %v %v", d, ok)
	}
}
