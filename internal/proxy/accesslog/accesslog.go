// Package accesslog writes the optional access log: one JSON object per
// request and line, with what sturdy decided about it (route, pool, host,
// attempts, outcome class, attribution, cache status). The request path
// only hands a Record to a bounded queue; Run encodes and buffers, so a
// slow disk costs dropped (and counted) records, never slow requests.
package accesslog

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/view"
)

// Defaults for Options.
const (
	DefaultQueue         = 4096
	DefaultFlushInterval = time.Second
	bufferSize           = 64 << 10
)

// Options configure a Logger. The zero value is usable.
type Options struct {
	// Queue bounds the records waiting for the writer. When it is full,
	// records are dropped and counted. Default 4096.
	Queue int
	// FlushInterval is how long a record may sit in the write buffer.
	// Default 1s.
	FlushInterval time.Duration
	// Log receives write errors (at most one line per minute). Default: none.
	Log *slog.Logger
}

// Logger is an access log. A nil *Logger is valid and logs nothing, so
// callers need not check whether the access log is enabled.
type Logger struct {
	ch       chan Record
	done     chan struct{} // closed when Run has returned
	reopen   chan chan error
	interval time.Duration
	log      *slog.Logger
	path     string // "" when writing to a caller's io.Writer or stdout

	closed                   atomic.Bool
	written, dropped, errors atomic.Uint64

	// Owned by Run.
	w         io.Writer
	file      *os.File // nil unless opened from path
	bw        *bufio.Writer
	buf       []byte
	lastError time.Time
}

// New returns a logger writing to w; Run writes.
func New(w io.Writer, o Options) *Logger {
	l := newLogger(o)
	l.w = w
	l.bw = bufio.NewWriterSize(w, bufferSize)
	return l
}

// Open returns a logger appending to the file at path, created if needed;
// "" or "-" means standard output.
func Open(path string, o Options) (*Logger, error) {
	if path == "" || path == "-" {
		return New(os.Stdout, o), nil
	}
	f, err := openFile(path)
	if err != nil {
		return nil, err
	}
	l := newLogger(o)
	l.path, l.file, l.w = path, f, f
	l.bw = bufio.NewWriterSize(f, bufferSize)
	return l, nil
}

func newLogger(o Options) *Logger {
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	return &Logger{
		ch: make(chan Record, o.Queue), done: make(chan struct{}),
		reopen: make(chan chan error), interval: o.FlushInterval, log: o.Log,
		buf: make([]byte, 0, 512),
	}
}

func openFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("access log: %w", err)
	}
	return f, nil
}

// Log queues r for writing. It never waits: when the writer is behind and
// the queue is full, r is dropped and counted.
func (l *Logger) Log(r Record) {
	if l == nil {
		return
	}
	if l.closed.Load() {
		l.dropped.Add(1)
		return
	}
	select {
	case l.ch <- r:
	default:
		l.dropped.Add(1)
	}
}

// Stats reports the counts for the status page and metrics.
func (l *Logger) Stats() view.AccessLog {
	if l == nil {
		return view.AccessLog{}
	}
	return view.AccessLog{Enabled: true, Written: l.written.Load(), Dropped: l.dropped.Load(), Errors: l.errors.Load()}
}

// Reopen closes and reopens the file, for log rotation (rename the file,
// then call Reopen, e.g. on SIGHUP or USR1). It does nothing for standard
// output or a caller's writer. It is done by Run, and waits for it.
func (l *Logger) Reopen() error {
	if l == nil || l.path == "" {
		return nil
	}
	reply := make(chan error, 1)
	select {
	case l.reopen <- reply:
		return <-reply
	case <-l.done:
		return errors.New("access log: closed")
	}
}

// Run writes queued records until ctx ends, then writes what is still
// queued, flushes, and closes the file (not standard output or a caller's
// writer). Records logged after that are dropped and counted.
func (l *Logger) Run(ctx context.Context) error {
	if l == nil {
		return nil
	}
	defer close(l.done)
	tick := time.NewTicker(l.interval)
	defer tick.Stop()
	for {
		select {
		case r := <-l.ch:
			l.write(&r)
		case <-tick.C:
			l.flush()
		case reply := <-l.reopen:
			reply <- l.doReopen()
		case <-ctx.Done():
			l.closed.Store(true)
			for {
				select {
				case r := <-l.ch:
					l.write(&r)
				default:
					l.flush()
					if l.file != nil {
						return l.file.Close()
					}
					return nil
				}
			}
		}
	}
}

func (l *Logger) write(r *Record) {
	l.buf = r.Append(l.buf[:0])
	l.buf = append(l.buf, '\n')
	if _, err := l.bw.Write(l.buf); err != nil {
		l.fail(err)
		return
	}
	l.written.Add(1)
}

func (l *Logger) flush() {
	if l.bw.Buffered() == 0 {
		return
	}
	if err := l.bw.Flush(); err != nil {
		l.fail(err)
	}
}

// fail counts a write error and discards the buffer: bufio.Writer keeps
// failing after one error, and the access log must recover when the disk
// does.
func (l *Logger) fail(err error) {
	l.errors.Add(1)
	l.bw.Reset(l.w)
	if l.log != nil && time.Since(l.lastError) >= time.Minute {
		l.lastError = time.Now()
		l.log.Error("access log write failed; records are being lost", "err", err, "errors_total", l.errors.Load())
	}
}

func (l *Logger) doReopen() error {
	// Records queued before Reopen was called belong to the old file. Only
	// those: under load the queue never empties.
	for n := len(l.ch); n > 0; n-- {
		r := <-l.ch
		l.write(&r)
	}
	l.flush()
	f, err := openFile(l.path)
	if err != nil {
		return err // keep writing to the old file
	}
	old := l.file
	l.file, l.w = f, f
	l.bw.Reset(f)
	return old.Close()
}
