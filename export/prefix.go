package export

import (
	"context"
	"errors"
	"fmt"
	"io"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// DeletePrefix deletes every object of bucket whose key starts with prefix,
// except the object keep ("" keeps none). An object that vanishes meanwhile
// is not an error. An empty prefix is refused, since it would empty the
// bucket. It goes on after a failed delete and reports every failure.
func DeletePrefix(ctx context.Context, bucket *blob.Bucket, prefix, keep string) error {
	if prefix == "" {
		return errors.New("export: delete prefix: refusing an empty prefix")
	}
	var errs []error
	it := bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("export: list %s: %w", prefix, err))
			break
		}
		if obj.IsDir || obj.Key == keep {
			continue
		}
		if err := bucket.Delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			errs = append(errs, fmt.Errorf("export: delete %s: %w", obj.Key, err))
			if ctx.Err() != nil {
				break
			}
		}
	}
	return errors.Join(errs...)
}
