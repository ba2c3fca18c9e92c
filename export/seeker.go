package export

import (
	"context"
	"errors"
	"fmt"
	"io"

	"gocloud.dev/blob"
)

// ObjectReader reads one stored object as an io.ReadSeeker without loading
// it: each Read continues a range read of the object from the current
// offset, opened lazily and reopened only after a Seek moved elsewhere. It
// suits http.ServeContent, which serves Range requests by seeking.
//
// An ObjectReader is for one goroutine. The caller closes it.
type ObjectReader struct {
	ctx         context.Context
	bucket      *blob.Bucket
	key         string
	size        int64
	contentType string

	offset int64        // where the next Read starts
	rd     *blob.Reader // open range reader, or nil
	rdAt   int64        // where rd's next byte is
}

// NewObjectReader returns a reader of the object key of bucket, positioned
// at its start. It reads the object's attributes (size and Content-Type)
// but none of its bytes. Reads use ctx.
func NewObjectReader(ctx context.Context, bucket *blob.Bucket, key string) (*ObjectReader, error) {
	attrs, err := bucket.Attributes(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("export: open object %s: %w", key, err)
	}
	return &ObjectReader{ctx: ctx, bucket: bucket, key: key, size: attrs.Size, contentType: attrs.ContentType}, nil
}

// Size returns the length of the object in bytes.
func (r *ObjectReader) Size() int64 { return r.size }

// ContentType returns the Content-Type the object was stored with.
func (r *ObjectReader) ContentType() string { return r.contentType }

// Read reads up to len(p) bytes from the current offset. At the end of the
// object it returns 0, io.EOF. An object shorter than its recorded size
// yields io.ErrUnexpectedEOF.
func (r *ObjectReader) Read(p []byte) (int, error) {
	if r.offset >= r.size {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if r.rd != nil && r.rdAt != r.offset {
		r.release()
	}
	if r.rd == nil {
		rd, err := r.bucket.NewRangeReader(r.ctx, r.key, r.offset, -1, nil)
		if err != nil {
			return 0, fmt.Errorf("export: read object %s at %d: %w", r.key, r.offset, err)
		}
		r.rd, r.rdAt = rd, r.offset
	}
	if remaining := r.size - r.offset; int64(len(p)) > remaining {
		p = p[:remaining]
	}
	n, err := r.rd.Read(p)
	r.offset += int64(n)
	r.rdAt += int64(n)
	switch {
	case errors.Is(err, io.EOF):
		r.release()
		if r.offset < r.size && n == 0 {
			return 0, fmt.Errorf("export: read object %s: ended at %d of %d bytes: %w", r.key, r.offset, r.size, io.ErrUnexpectedEOF)
		}
		return n, nil
	case err != nil:
		r.release()
		return n, fmt.Errorf("export: read object %s at %d: %w", r.key, r.offset, err)
	}
	return n, nil
}

// Seek sets the offset of the next Read, relative to the start
// (io.SeekStart), the current offset (io.SeekCurrent) or the end
// (io.SeekEnd), and returns the new offset. It does no I/O. Seeking before
// the start is an error; seeking past the end is allowed, and Read there
// returns io.EOF.
func (r *ObjectReader) Seek(offset int64, whence int) (int64, error) {
	var base int64
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		base = r.offset
	case io.SeekEnd:
		base = r.size
	default:
		return r.offset, fmt.Errorf("export: seek object %s: invalid whence %d", r.key, whence)
	}
	target := base + offset
	if target < 0 {
		return r.offset, fmt.Errorf("export: seek object %s: negative offset %d", r.key, target)
	}
	r.offset = target
	return target, nil
}

// Close releases the open range reader, if any. The ObjectReader may be
// read again afterwards, which opens a new one.
func (r *ObjectReader) Close() error {
	if r.rd == nil {
		return nil
	}
	err := r.rd.Close()
	r.rd = nil
	if err != nil {
		return fmt.Errorf("export: close object %s: %w", r.key, err)
	}
	return nil
}

// release closes the open range reader, ignoring its error: it is only
// abandoned, never relied upon again.
func (r *ObjectReader) release() {
	if r.rd != nil {
		_ = r.rd.Close()
		r.rd = nil
	}
}
