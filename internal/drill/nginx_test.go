package drill

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// nginx must reproduce the incidents the drill re-enacts; otherwise the
// comparison proves nothing. Runs only where nginx is installed, and
// briefly.
func TestNginxReenactsTheIncidents(t *testing.T) {
	if testing.Short() {
		t.Skip("the nginx comparison takes about 6s; -short skips it")
	}
	tg, err := Nginx(context.Background(), false, os.Stderr)
	if errors.Is(err, ErrNoNginx) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	scs, err := Select([]string{"waf-scanner", "malformed-url", "stale-mask/outage"})
	if err != nil {
		t.Fatal(err)
	}
	for i, sc := range scs {
		t.Run(sc.Name, func(t *testing.T) {
			o := short()
			o.Duration = time.Second
			if sc.Base() == "stale-mask" {
				// Copies must outlive max-age (1s) by a margin before they
				// are provably stale.
				o.Duration = 3 * time.Second
			}
			r, err := RunOne(context.Background(), tg, sc, o, 100+i)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s", r.Verdict, r.Why)
			if r.Verdict != Fail {
				t.Errorf("nginx %s: %s", r.Verdict, r.Why)
			}
			switch sc.Base() {
			case "stale-mask":
				if r.Stale.Unlabelled == 0 {
					t.Errorf("no unlabelled stale answers from nginx: %+v", r.Stale)
				}
			default:
				if r.Innocent.Failures == 0 || r.LogLines == 0 {
					t.Errorf("innocent failures %d, log lines %d", r.Innocent.Failures, r.LogLines)
				}
			}
		})
	}
}
