package export

import (
	"context"
	"fmt"
	"net/url"

	"gocloud.dev/blob"
	// The drivers OpenBucket accepts: file://, mem:// and s3://.
	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/memblob"
	_ "gocloud.dev/blob/s3blob"
)

// OpenBucket opens the object storage bucket named by rawURL.
//
// Accepted schemes:
//
//   - file:///abs/dir stores objects as files under /abs/dir. Unless the URL
//     says otherwise, OpenBucket sets fileblob's create_dir (the directory is
//     created if missing) and no_tmp_dir (an object being written lives in a
//     temporary file next to its final path, so the rename that publishes it
//     never crosses file systems, and the leftovers of a crashed process sit
//     under the export's key prefix where DeletePrefix removes them), and
//     its dir_file_mode to 0700: the folders it creates are the service's
//     alone (objects themselves are written 0600, see NewObjectWriter).
//   - mem:// is a fresh, empty in-memory bucket, for tests.
//   - s3://bucket?region=... is an Amazon S3 (or compatible) bucket, with
//     credentials from the usual AWS environment.
//
// The caller closes the bucket.
func OpenBucket(ctx context.Context, rawURL string) (*blob.Bucket, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("export: parse bucket URL: %w", err)
	}
	if u.Scheme == "file" {
		q := u.Query()
		for _, param := range []string{"create_dir", "no_tmp_dir"} {
			if !q.Has(param) {
				q.Set(param, "1")
			}
		}
		if !q.Has("dir_file_mode") {
			q.Set("dir_file_mode", "0700")
		}
		u.RawQuery = q.Encode()
	}
	b, err := blob.OpenBucket(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("export: open bucket %s://%s%s: %w", u.Scheme, u.Host, u.Path, err)
	}
	return b, nil
}
