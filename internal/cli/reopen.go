package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// cmdReopen makes the running sturdy reopen its log files (after logrotate
// renamed them): SIGUSR1 to the process named by --pid, $MAINPID or the
// config's pid_file, as nginx -s reopen does.
func (p *program) cmdReopen(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := p.newFlags("reopen", stderr)
	file := configFlag(fs)
	pidFlag := fs.Int("pid", 0, "process to send SIGUSR1 to (default: $MAINPID, else pid_file)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	pidFile := ""
	if *pidFlag == 0 && os.Getenv("MAINPID") == "" {
		cfg, err := config.Load(*file)
		if err != nil {
			printConfigError(stderr, err)
			return exitFail
		}
		pidFile = cfg.PIDFile
	}
	pid, err := runningPID(*pidFlag, pidFile)
	if err != nil {
		fmt.Fprintf(stderr, "cannot find the running sturdy: %v\n", err)
		return exitFail
	}
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		fmt.Fprintf(stderr, "cannot signal process %d: %v\n", pid, err)
		return exitFail
	}
	fmt.Fprintf(stdout, "SIGUSR1 sent to process %d: it reopens its log files\n", pid)
	return exitOK
}

// writablePaths are errors for the files sturdy writes that this user
// could not create or write: sturdy check runs as the service's user
// (the unit's ExecStartPre), so a log directory the unit does not create
// fails the check rather than the start, over and over.
func writablePaths(cfg *config.Config) config.ErrorList {
	var errs config.ErrorList
	check := func(key, path string) {
		if err := canWrite(path); err != nil {
			errs = append(errs, cfg.Errorf(key, "sturdy cannot write %s as this user (uid %d): %v", path, os.Getuid(), err))
		}
	}
	if a := cfg.Log.Access; a.Enabled && a.Path != "" && a.Path != "-" {
		check("log.access.path", a.Path)
	}
	if cfg.PIDFile != "" {
		check("pid_file", cfg.PIDFile)
	}
	return errs
}

// canWrite reports why path could not be opened for writing, or created
// in its directory: access(2) with the real user, nothing is created.
func canWrite(path string) error {
	err := unix.Access(path, unix.W_OK)
	if err == nil || !os.IsNotExist(err) {
		return err
	}
	dir := filepath.Dir(path)
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return fmt.Errorf("cannot create it in %s: %w", dir, err)
	}
	return nil
}
