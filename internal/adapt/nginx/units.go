package nginx

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseTime reads an nginx time value: "30s", "500ms", "1m", "1h 30m",
// "2d", or a bare number of seconds. Units: ms, s, m, h, d, w, M (30 days),
// y (365 days).
func ParseTime(s string) (time.Duration, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return 0, fmt.Errorf("empty time value")
	}
	if n, err := strconv.ParseInt(in, 10, 64); err == nil {
		if n < 0 || n > 1<<31 {
			return 0, fmt.Errorf("time %q out of range", s)
		}
		return time.Duration(n) * time.Second, nil
	}
	var total time.Duration
	rest := in
	for rest != "" {
		rest = strings.TrimLeft(rest, " ")
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 || i > 9 {
			return 0, fmt.Errorf("invalid time %q; expected a number with a unit, like 10s or 1m", s)
		}
		n, _ := strconv.ParseInt(rest[:i], 10, 64)
		rest = rest[i:]
		unit := time.Second
		switch {
		case strings.HasPrefix(rest, "ms"):
			unit, rest = time.Millisecond, rest[2:]
		case rest == "" || rest[0] == ' ':
			// a bare number among units counts as seconds
		default:
			switch rest[0] {
			case 's':
			case 'm':
				unit = time.Minute
			case 'h':
				unit = time.Hour
			case 'd':
				unit = 24 * time.Hour
			case 'w':
				unit = 7 * 24 * time.Hour
			case 'M':
				unit = 30 * 24 * time.Hour
			case 'y':
				unit = 365 * 24 * time.Hour
			default:
				return 0, fmt.Errorf("invalid time %q; unknown unit %q", s, rest[:1])
			}
			rest = rest[1:]
		}
		total += time.Duration(n) * unit
	}
	return total, nil
}

// ParseSize reads an nginx size: "512", "8k", "10m", "1g" (powers of 1024,
// either case).
func ParseSize(s string) (int64, error) {
	in := strings.TrimSpace(s)
	mult := int64(1)
	if in != "" {
		switch in[len(in)-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		}
		if mult != 1 {
			in = in[:len(in)-1]
		}
	}
	n, err := strconv.ParseInt(in, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q; expected bytes like 512, 8k, 10m or 1g", s)
	}
	return n * mult, nil
}

// FormatTime prints a duration the way nginx configs (and sturdy's) write
// them: "10s", "5m", "1h", or Go's form when it is not a whole unit.
func FormatTime(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}
