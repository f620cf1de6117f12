package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written as "750ms", "30s", "5m" or "1h30m".
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d *Duration) decodeScalar(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("invalid duration %q; expected a non-negative number with a unit, like 750ms, 30s or 5m", s)
	}
	*d = Duration(v)
	return nil
}

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML writes the duration in the form it is read in.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// Size is a byte count written as a plain number or with a unit: "512",
// "64KiB", "10MiB", "1GiB" (also KB, MB, GB as powers of 1000).
type Size int64

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000},
	{"B", 1},
}

func (z *Size) decodeScalar(s string) error {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return fmt.Errorf("invalid size %q; expected a non-negative byte count like 65536, 64KiB or 10MiB", s)
	}
	*z = Size(n * mult)
	return nil
}

func (z Size) String() string {
	switch {
	case z != 0 && z%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", z>>30)
	case z != 0 && z%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", z>>20)
	case z != 0 && z%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", z>>10)
	}
	return strconv.FormatInt(int64(z), 10)
}

// MarshalYAML writes the size in the form it is read in.
func (z Size) MarshalYAML() (any, error) { return z.String(), nil }

// Error is one problem in a config file.
type Error struct {
	File string
	Line int // 0 when unknown
	Path string
	Msg  string
}

func (e Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is every problem found in a config file, in file order.
type ErrorList []Error

func (l ErrorList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}
