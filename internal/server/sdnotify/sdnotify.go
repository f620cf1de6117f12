// Package sdnotify speaks systemd's notification protocol (sd_notify(3)):
// datagrams of KEY=VALUE lines to the unix socket named by $NOTIFY_SOCKET,
// telling the service manager when sturdy is ready, reloading or stopping,
// and feeding its watchdog. It is a few lines over a datagram socket, so it
// is written here rather than pulled in from a library.
package sdnotify

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Notifier sends notifications. A nil Notifier, or one without a socket,
// does nothing, so callers need not ask whether they run under systemd.
type Notifier struct {
	addr *net.UnixAddr
}

// FromEnv returns a Notifier for $NOTIFY_SOCKET, or nil when it is unset.
// An address starting with @ is in the abstract namespace.
func FromEnv() *Notifier {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return nil
	}
	if path[0] == '@' {
		path = "\x00" + path[1:]
	}
	return &Notifier{addr: &net.UnixAddr{Name: path, Net: "unixgram"}}
}

// Notify sends one notification: lines of KEY=VALUE.
func (n *Notifier) Notify(lines ...string) error {
	if n == nil || n.addr == nil {
		return nil
	}
	c, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(strings.Join(lines, "\n") + "\n"))
	return err
}

// Ready says the service is up (listeners bound), with a status line.
func (n *Notifier) Ready(status string) error {
	return n.Notify("READY=1", "STATUS="+status)
}

// MainPID tells systemd that pid is the service's main process now (the
// new process after a binary upgrade), then that it is ready.
func (n *Notifier) MainPID(pid int, status string) error {
	return n.Notify("MAINPID="+strconv.Itoa(pid), "READY=1", "STATUS="+status)
}

// Reloading says a reload has begun; Ready must follow when it is over.
func (n *Notifier) Reloading() error {
	return n.Notify("RELOADING=1", "MONOTONIC_USEC="+strconv.FormatInt(monotonicUsec(), 10))
}

// Stopping says the service is shutting down.
func (n *Notifier) Stopping(status string) error {
	return n.Notify("STOPPING=1", "STATUS="+status)
}

// Status updates the one-line status systemctl shows.
func (n *Notifier) Status(status string) error { return n.Notify("STATUS=" + status) }

// WatchdogInterval is how often systemd expects a keep-alive
// ($WATCHDOG_USEC, for this process per $WATCHDOG_PID), or 0 when the
// watchdog is off.
func WatchdogInterval() time.Duration {
	usec, err := strconv.ParseInt(os.Getenv("WATCHDOG_USEC"), 10, 64)
	if err != nil || usec <= 0 {
		return 0
	}
	if pid := os.Getenv("WATCHDOG_PID"); pid != "" && pid != strconv.Itoa(os.Getpid()) {
		return 0
	}
	return time.Duration(usec) * time.Microsecond
}

// RunWatchdog pings the watchdog at half the interval while alive()
// holds, until ctx ends. A process whose serving loop is stuck stops
// pinging, and systemd restarts it.
func (n *Notifier) RunWatchdog(ctx context.Context, interval time.Duration, alive func() bool) error {
	if n == nil || interval <= 0 {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if alive() {
				n.Notify("WATCHDOG=1")
			}
		}
	}
}

func monotonicUsec() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano() / 1000
}
