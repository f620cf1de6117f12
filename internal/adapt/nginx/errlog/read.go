package errlog

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
)

// readBufSize bounds the memory one line may take; longer lines are
// analysed by their first readBufSize bytes (the fields that matter come
// first, except for a huge request line).
const readBufSize = 256 << 10

// Read streams one log into the Analyzer. Gzip input is detected by its
// magic bytes and decompressed on the fly; name is used in the result and
// in errors. It stops early, with ctx's error, when ctx is done.
func (a *Analyzer) Read(ctx context.Context, r io.Reader, name string) error {
	br := bufio.NewReaderSize(r, readBufSize)
	f := File{Name: name}
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("%s: looks gzip-compressed but cannot be read: %w", name, err)
		}
		defer zr.Close()
		f.Gzip = true
		br = bufio.NewReaderSize(zr, readBufSize)
	}
	a.cur = &f
	err := a.scan(ctx, br, &f)
	a.cur = nil
	a.files = append(a.files, f)
	if err != nil {
		return fmt.Errorf("%s: after %d lines: %w", name, f.Lines, err)
	}
	return nil
}

func (a *Analyzer) scan(ctx context.Context, br *bufio.Reader, f *File) error {
	for {
		if f.Lines%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		line, err := br.ReadSlice('\n')
		size := len(line)
		if err == bufio.ErrBufferFull {
			f.LongLines++
			head := bytes.Clone(line) // the buffer is reused while skipping the rest
			n, derr := discardLine(br)
			size += n
			a.feed(f, head, size)
			if derr == io.EOF {
				return nil
			}
			if derr != nil {
				return derr
			}
			continue
		}
		if len(line) > 0 {
			a.feed(f, bytes.TrimRight(line, "\r\n"), size)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (a *Analyzer) feed(f *File, line []byte, size int) {
	f.Lines++
	f.Bytes += int64(size)
	a.Line(line, size)
}

// discardLine skips to the end of the current line, returning the bytes skipped.
func discardLine(br *bufio.Reader) (int, error) {
	n := 0
	for {
		b, err := br.ReadSlice('\n')
		n += len(b)
		if err != bufio.ErrBufferFull {
			return n, err
		}
	}
}
