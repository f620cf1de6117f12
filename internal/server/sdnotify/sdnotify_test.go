package sdnotify

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// listen is a real unix datagram socket standing in for systemd's.
func listen(t *testing.T) (*net.UnixConn, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, path
}

func next(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 4096)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func TestTheProtocolOverARealSocket(t *testing.T) {
	c, path := listen(t)
	t.Setenv("NOTIFY_SOCKET", path)
	n := FromEnv()
	n.Ready("serving 2 listeners")
	if got := next(t, c); got != "READY=1\nSTATUS=serving 2 listeners\n" {
		t.Errorf("ready: %q", got)
	}
	n.Reloading()
	got := next(t, c)
	if !strings.HasPrefix(got, "RELOADING=1\nMONOTONIC_USEC=") || strings.HasSuffix(got, "MONOTONIC_USEC=0\n") {
		t.Errorf("reloading: %q", got)
	}
	n.MainPID(4242, "upgraded")
	if got := next(t, c); got != "MAINPID=4242\nREADY=1\nSTATUS=upgraded\n" {
		t.Errorf("main pid: %q", got)
	}
	n.Stopping("draining")
	if got := next(t, c); got != "STOPPING=1\nSTATUS=draining\n" {
		t.Errorf("stopping: %q", got)
	}
}

func TestWatchdogPingsAtHalfTheIntervalWhileAlive(t *testing.T) {
	c, path := listen(t)
	t.Setenv("NOTIFY_SOCKET", path)
	t.Setenv("WATCHDOG_USEC", "200000")
	t.Setenv("WATCHDOG_PID", "")
	if got := WatchdogInterval(); got != 200*time.Millisecond {
		t.Fatalf("interval %s", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go FromEnv().RunWatchdog(ctx, WatchdogInterval(), func() bool { return true })
	start := time.Now()
	for range 3 {
		if got := next(t, c); got != "WATCHDOG=1\n" {
			t.Fatalf("%q", got)
		}
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("three pings in %s: faster than every 100ms", d)
	}
}

func TestWithoutASocketNothingHappens(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	t.Setenv("WATCHDOG_USEC", "")
	n := FromEnv()
	if n != nil || n.Ready("x") != nil || n.Stopping("x") != nil || WatchdogInterval() != 0 {
		t.Fatal("without $NOTIFY_SOCKET a notifier must be nil and quiet")
	}
}
