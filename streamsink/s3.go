package streamsink

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/aetheriot/aether-audit/export"
)

// The metadata of a stream object (S3 user metadata, x-amz-meta-*).
const (
	MetaSHA256        = "sha256"
	MetaChainHash     = "chain-hash"
	MetaFirstSequence = "first-sequence"
	MetaLastSequence  = "last-sequence"
	MetaEvents        = "events"
	MetaStreamID      = "stream-id"
)

// ObjectContentType is the content type of stream objects: the .gz file
// itself, with no Content-Encoding (as gzipped exports).
const ObjectContentType = "application/gzip"

// S3 writes each batch as one object of a gocloud.dev/blob bucket (any
// S3-compatible endpoint, or file:// and mem:// in development):
//
//	audit/<tenant>/<project>/<first>-<last>.ndjson.gz
//
// with <tenant> and <project> escaped as export keys are
// (export.KeySegment) and the sequences of the first and last event in 20
// zero-padded digits, so that listing the prefix in order lists the
// history in order. The object is the NDJSON of HTTPS, gzipped, written
// once (a conditional write); its metadata holds the SHA-256 of its bytes
// (sha256), the chain hash of its last event (chain-hash), its first and
// last sequence and its event count. After each object the project's
// manifest (audit/<tenant>/<project>/manifest.json, ManifestOf) is
// replaced. A batch written before (a redelivery after a crash) is
// acknowledged when the stored object has the same digest.
type S3 struct {
	Bucket   *blob.Bucket
	StreamID string
}

// Manifest is the last object of a project, as manifest.json holds it.
type Manifest struct {
	StreamID      string    `json:"streamId"`
	TenantID      string    `json:"tenantId"`
	ProjectID     string    `json:"projectId"`
	LastSequence  uint64    `json:"lastSequence,string"`
	LastObject    string    `json:"lastObject"`
	LastDigest    string    `json:"lastDigest"`
	LastChainHash string    `json:"lastChainHash"`
	UpdatedAt     time.Time `json:"updatedAt"`
}

// ObjectPrefix is "audit/<tenant>/<project>/", under which a project's
// objects and manifest are.
func ObjectPrefix(tenantID, projectID string) string {
	return "audit/" + export.KeySegment(tenantID) + "/" + export.KeySegment(projectID) + "/"
}

// ObjectKey is the key of the object holding first..last of a project.
func ObjectKey(tenantID, projectID string, first, last uint64) string {
	return fmt.Sprintf("%s%020d-%020d.ndjson.gz", ObjectPrefix(tenantID, projectID), first, last)
}

// ManifestKey is the key of a project's manifest.
func ManifestKey(tenantID, projectID string) string {
	return ObjectPrefix(tenantID, projectID) + "manifest.json"
}

// Format implements Sink.
func (s *S3) Format() Format { return FormatGzipNDJSON }

// Deliver implements Sink.
func (s *S3) Deliver(ctx context.Context, b *Batch) error {
	if b.Events == 0 {
		return nil
	}
	data := b.Body()
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	key := ObjectKey(b.TenantID, b.ProjectID, b.First, b.Last)
	meta := map[string]string{
		MetaSHA256: digest, MetaChainHash: hex.EncodeToString(b.LastChainHash[:]),
		MetaFirstSequence: strconv.FormatUint(b.First, 10), MetaLastSequence: strconv.FormatUint(b.Last, 10),
		MetaEvents: strconv.Itoa(b.Events), MetaStreamID: s.StreamID,
	}
	if err := s.writeOnce(ctx, key, data, meta); err != nil {
		return err
	}
	m, _ := json.Marshal(Manifest{
		StreamID: s.StreamID, TenantID: b.TenantID, ProjectID: b.ProjectID, LastSequence: b.Last,
		LastObject: key, LastDigest: "sha256:" + digest, LastChainHash: meta[MetaChainHash], UpdatedAt: time.Now().UTC(),
	})
	if err := s.Bucket.Upload(ctx, ManifestKey(b.TenantID, b.ProjectID), bytes.NewReader(m), &blob.WriterOptions{ContentType: "application/json"}); err != nil {
		return &DeliveryError{Message: "writing the manifest: " + storageMessage(err)}
	}
	return nil
}

// writeOnce stores data under key unless an object is there already; one
// with the same digest counts as written. The bytes go to the bucket as
// they are (Upload: no MD5 of them, which S3 no longer checks).
func (s *S3) writeOnce(ctx context.Context, key string, data []byte, meta map[string]string) error {
	err := s.Bucket.Upload(ctx, key, bytes.NewReader(data), &blob.WriterOptions{ContentType: ObjectContentType, Metadata: meta, IfNotExist: true})
	if err == nil {
		return nil
	}
	if gcerrors.Code(err) != gcerrors.FailedPrecondition {
		return &DeliveryError{Message: "writing " + key + ": " + storageMessage(err)}
	}
	attrs, aerr := s.Bucket.Attributes(ctx, key)
	if aerr != nil {
		return &DeliveryError{Message: "reading " + key + ": " + storageMessage(aerr)}
	}
	if attrs.Metadata[MetaSHA256] != meta[MetaSHA256] {
		return &DeliveryError{Message: "object " + key + " exists with other content (another stream writes the same names: give each its own prefix)"}
	}
	return nil
}

// storageMessage is a storage error for lastError: its gocloud code and
// text, which name the operation and key but no credential.
func storageMessage(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	return gcerrors.Code(err).String() + ": " + err.Error()
}

// Close implements Sink: it closes the bucket.
func (s *S3) Close() error { return s.Bucket.Close() }

// EventRef is what a receiver needs of a streamed event line to check a
// stream's completeness: where the event belongs and its chain hash.
type EventRef struct {
	TenantID  string `json:"tenantId"`
	ProjectID string `json:"projectId"`
	Sequence  uint64 `json:"sequence,string"`
	Action    string `json:"action"`
	ChainHash string `json:"chainHash"`
}

// ReadObject returns the events of a stream object after checking its
// bytes against its sha256 metadata: how a receiver (and the tests) read
// what a stream wrote.
func ReadObject(ctx context.Context, bucket *blob.Bucket, key string) ([]EventRef, map[string]string, error) {
	attrs, err := bucket.Attributes(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	data, err := bucket.ReadAll(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != attrs.Metadata[MetaSHA256] {
		return nil, attrs.Metadata, fmt.Errorf("%s: digest mismatch", key)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, attrs.Metadata, err
	}
	dec := json.NewDecoder(zr)
	var out []EventRef
	for {
		var e EventRef
		if err := dec.Decode(&e); err == io.EOF {
			break
		} else if err != nil {
			return nil, attrs.Metadata, fmt.Errorf("%s: %w", key, err)
		}
		out = append(out, e)
	}
	return out, attrs.Metadata, nil
}
