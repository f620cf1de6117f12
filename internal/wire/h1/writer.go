package h1

import (
	"io"
	"net"
)

// writer buffers a connection's response bytes, as bufio.Writer does,
// with one difference: a write too large for what is left of the buffer
// goes out with what is buffered in one writev, not in two writes. A head
// followed by a large body (the part of a backend's body its client read
// with the head, before the rest is spliced) is then one system call.
type writer struct {
	nc  net.Conn
	buf []byte
	err error
	// Write's writev: vec is set over arr each time, so that neither
	// is allocated per call (the writev consumes vec).
	arr [2][]byte
	vec net.Buffers
	// dl is the connection's write deadline, put on the socket only
	// when a write must wait (see writeDeadline); nil: none to mind.
	dl *writeDeadline
}

func newWriter(size int) *writer { return &writer{buf: make([]byte, 0, size)} }

// Reset discards what is buffered and any error, and writes to nc next.
func (w *writer) Reset(nc net.Conn) {
	w.nc, w.buf, w.err, w.dl = nc, w.buf[:0], nil, nil
}

func (w *writer) Buffered() int  { return len(w.buf) }
func (w *writer) Available() int { return cap(w.buf) - len(w.buf) }

// AvailableBuffer is an empty slice over the free part of the buffer, for
// appending to and passing to Write at once.
func (w *writer) AvailableBuffer() []byte { return w.buf[len(w.buf):][:0] }

func (w *writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if len(w.buf) == 0 {
		return nil
	}
	var n int
	var err error
	if w.dl != nil && w.dl.pending() {
		n, err = w.dl.writeLazily(w.buf)
	} else {
		n, err = w.nc.Write(w.buf)
	}
	if err == nil && n < len(w.buf) {
		err = io.ErrShortWrite
	}
	if err != nil {
		w.err = err
		return err
	}
	w.buf = w.buf[:0]
	return nil
}

func (w *writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if len(p) <= w.Available() {
		w.buf = append(w.buf, p...)
		return len(p), nil
	}
	if w.dl != nil {
		w.dl.apply() // large writes are rarer: not worth a lazy writev
	}
	if len(w.buf) == 0 {
		n, err := w.nc.Write(p)
		if err != nil {
			w.err = err
		}
		return n, err
	}
	had := int64(len(w.buf))
	w.arr = [2][]byte{w.buf, p}
	w.vec = w.arr[:]
	n, err := w.vec.WriteTo(w.nc)
	w.arr, w.vec = [2][]byte{}, nil
	if err == nil && n < had+int64(len(p)) {
		err = io.ErrShortWrite
	}
	if err != nil {
		w.err = err
		return int(max(n-had, 0)), err
	}
	w.buf = w.buf[:0]
	return len(p), nil
}

func (w *writer) WriteString(s string) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if len(s) <= w.Available() {
		w.buf = append(w.buf, s...)
		return len(s), nil
	}
	return w.Write([]byte(s))
}

func (w *writer) WriteByte(c byte) error {
	if w.err != nil {
		return w.err
	}
	if w.Available() == 0 && w.Flush() != nil {
		return w.err
	}
	w.buf = append(w.buf, c)
	return nil
}
