// Package spool keeps request bodies too large for memory in files of one
// directory while they wait, whole, for a backend, within a bound on the
// bytes of all of them at once.
//
// The directory is sturdy's own (mode 0700, owned by its user) and each
// file is made 0600 and unlinked as soon as it is created: no other user
// can read a body, and the disk space comes back when the last descriptor
// closes, even after a crash. Files a crash left between creation and
// unlinking are removed when the directory is opened.
package spool

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
)

// ErrFull is a write that would take the bodies past the bound.
var ErrFull = errors.New("the request bodies waiting on disk would pass client_body_temp.max_size")

// prefix names the files of a spool.
const prefix = "body-"

// Dir is a spool directory and its bound. It is safe for concurrent use.
type Dir struct {
	path string
	max  int64
	used atomic.Int64 // bytes reserved by open files
}

// Open makes (or checks) the directory at path and removes leftover
// files; max bounds the bytes of all bodies at once.
func Open(path string, max int64) (*Dir, error) {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("%s belongs to another user (uid %d): request bodies must not be where others can reach them", path, st.Uid)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(path, 0o700); err != nil {
			return nil, err
		}
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) && e.Type().IsRegular() {
			os.Remove(filepath.Join(path, e.Name()))
		}
	}
	return &Dir{path: path, max: max}, nil
}

// Path is the directory.
func (d *Dir) Path() string { return d.path }

// Max is the bound.
func (d *Dir) Max() int64 { return d.max }

// Used is how many bytes the open files hold.
func (d *Dir) Used() int64 { return d.used.Load() }

// Create returns a new, already unlinked, file.
func (d *Dir) Create() (*File, error) {
	f, err := os.CreateTemp(d.path, prefix+"*")
	if err != nil {
		return nil, err
	}
	// Another process opening the directory may have removed it first,
	// as a leftover: gone either way.
	if err := os.Remove(f.Name()); err != nil && !errors.Is(err, os.ErrNotExist) {
		f.Close()
		return nil, err
	}
	return &File{d: d, f: f}, nil
}

// File is one body on disk: written once, then read as often as needed.
type File struct {
	d    *Dir
	f    *os.File
	size int64
}

// WriteError is a write to the disk that failed (not ErrFull).
type WriteError struct{ Err error }

func (e *WriteError) Error() string { return "writing the request body to disk: " + e.Err.Error() }
func (e *WriteError) Unwrap() error { return e.Err }

// Write appends p, within the directory's bound: ErrFull when the bodies
// would pass it, a *WriteError when the disk fails.
func (f *File) Write(p []byte) (int, error) {
	n := int64(len(p))
	if f.d.used.Add(n) > f.d.max {
		f.d.used.Add(-n)
		return 0, ErrFull
	}
	w, err := f.f.Write(p)
	f.d.used.Add(int64(w) - n)
	f.size += int64(w)
	if err != nil {
		return w, &WriteError{err}
	}
	return w, nil
}

// Size is how many bytes were written.
func (f *File) Size() int64 { return f.size }

// Reader reads the body from its start; readers are independent.
func (f *File) Reader() io.ReadCloser {
	return io.NopCloser(io.NewSectionReader(f.f, 0, f.size))
}

// Replay is Reader for http.Request.GetBody.
func (f *File) Replay() (io.ReadCloser, error) { return f.Reader(), nil }

// Close gives the file's space back. A reader still reading gets an
// error.
func (f *File) Close() error {
	f.d.used.Add(-f.size)
	f.size = 0
	return f.f.Close()
}
