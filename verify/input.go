package verify

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
)

const (
	// readBuffer is the size of the buffered reader the export's first
	// bytes (and a gzip stream) are read through.
	readBuffer = 1 << 20
	// MaxLineBytes is the longest export line read; an event is at most
	// about 1 MiB, so a longer line is a problem, not an event.
	MaxLineBytes = 8 << 20
)

// gzipMagic starts every gzip stream (RFC 1952).
var gzipMagic = []byte{0x1f, 0x8b}

// InputError is an export, checkpoint or key set that cannot be read at
// all (a missing file, no gzip header, a failed download): bad input,
// exit code ExitUsage, rather than a verification failure.
type InputError struct {
	What string
	Err  error
}

func (e *InputError) Error() string { return e.What + ": " + e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// exportReader reads an export file, plain or gzip (told by its first two
// bytes). Its reader r hands out the (decompressed) bytes straight into
// the caller's buffer: the export is read in chunks of a MiB (see
// readChunks), so a buffer of its own would only add a copy.
type exportReader struct {
	f  *os.File
	gz *gzip.Reader
	r  io.Reader
	// Compressed reports whether the file is gzip.
	Compressed bool
}

// openExport opens the export at path.
func openExport(path string) (*exportReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &InputError{"export", err}
	}
	er := &exportReader{f: f}
	br := bufio.NewReaderSize(f, readBuffer)
	magic, err := br.Peek(len(gzipMagic))
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, &InputError{"export", err}
	}
	if len(magic) == len(gzipMagic) && magic[0] == gzipMagic[0] && magic[1] == gzipMagic[1] {
		er.Compressed = true
		if er.gz, err = gzip.NewReader(br); err != nil {
			f.Close()
			return nil, &InputError{"export", fmt.Errorf("gzip: %w", err)}
		}
		er.r = er.gz
	} else {
		// What the peek read, then the rest of the file.
		buffered, _ := br.Peek(br.Buffered())
		er.r = io.MultiReader(bytes.NewReader(buffered), f)
	}
	return er, nil
}

// errLineTooLong is a line longer than MaxLineBytes.
var errLineTooLong = fmt.Errorf("line longer than %d bytes", MaxLineBytes)

// Close closes the file.
func (er *exportReader) Close() error {
	if er.gz != nil {
		er.gz.Close()
	}
	return er.f.Close()
}

// isDamagedGzip reports whether err is a gzip stream's own damage (cut
// short, corrupt, bad checksum) rather than a failure to read the file:
// the file is readable but not what was exported.
func isDamagedGzip(err error) bool {
	var corrupt flate.CorruptInputError
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, gzip.ErrChecksum) ||
		errors.Is(err, gzip.ErrHeader) || errors.As(err, &corrupt)
}
