package verify

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
)

const (
	// readBuffer is the size of the buffered reader of the export.
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
// bytes), through a large buffer.
type exportReader struct {
	f  *os.File
	gz *gzip.Reader
	r  *bufio.Reader
	// Compressed reports whether the file is gzip.
	Compressed bool
}

// openExport opens the export at path.
func openExport(path string) (*exportReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &InputError{"export", err}
	}
	er := &exportReader{f: f, r: bufio.NewReaderSize(f, readBuffer)}
	magic, err := er.r.Peek(len(gzipMagic))
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, &InputError{"export", err}
	}
	if len(magic) == len(gzipMagic) && magic[0] == gzipMagic[0] && magic[1] == gzipMagic[1] {
		er.Compressed = true
		if er.gz, err = gzip.NewReader(er.r); err != nil {
			f.Close()
			return nil, &InputError{"export", fmt.Errorf("gzip: %w", err)}
		}
		er.r = bufio.NewReaderSize(er.gz, readBuffer)
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
