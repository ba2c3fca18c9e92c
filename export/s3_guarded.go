package export

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	gcaws "gocloud.dev/aws"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"
)

// OpenGuardedBucket opens an s3:// bucket URL as OpenBucket does, but sends
// every request to S3 through client (webhook.Sender.GuardedClient: the SSRF
// policy applies to each connection after DNS resolution), for bucket URLs
// a tenant chose, whose endpoint could otherwise be made to resolve to an
// internal address after it was checked. Credentials are still resolved by
// the AWS SDK's own clients (the instance metadata service stays reachable
// for them); only the S3 requests go through client. It accepts the
// parameters of gocloud's s3blob URLs that select addressing and transport
// (endpoint, region, use_path_style, s3ForcePathStyle, disable_https,
// prefix and those gocloud's AWS configuration reads); the caller refuses
// any other first. Other schemes are opened by OpenBucket.
func OpenGuardedBucket(ctx context.Context, rawURL string, client *http.Client) (*blob.Bucket, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("export: parse bucket URL: %w", err)
	}
	if u.Scheme != s3blob.Scheme {
		return OpenBucket(ctx, rawURL)
	}
	mux := new(blob.URLMux)
	mux.RegisterBucket(s3blob.Scheme, guardedS3Opener{client: client})
	b, err := mux.OpenBucketURL(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("export: open bucket %s://%s%s: %w", u.Scheme, u.Host, u.Path, err)
	}
	return b, nil
}

// guardedS3Opener opens s3:// URLs with an S3 client whose requests go
// through client. The mux has taken the prefix parameter off already.
type guardedS3Opener struct {
	client *http.Client
}

// OpenBucketURL implements blob.BucketURLOpener.
func (o guardedS3Opener) OpenBucketURL(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	q := u.Query()
	opts := []func(*s3.Options){func(so *s3.Options) { so.HTTPClient = o.client }}
	for _, key := range []string{"use_path_style", "s3ForcePathStyle", "disable_https"} {
		raw := q.Get(key)
		if raw == "" {
			continue
		}
		q.Del(key)
		v, err := strconv.ParseBool(raw)
		if err != nil {
			return nil, fmt.Errorf("invalid value for %q: %w", key, err)
		}
		if key == "disable_https" {
			opts = append(opts, func(so *s3.Options) { so.EndpointOptions.DisableHTTPS = v })
		} else {
			opts = append(opts, func(so *s3.Options) { so.UsePathStyle = v })
		}
	}
	cfg, err := gcaws.V2ConfigFromURLParams(ctx, q)
	if err != nil {
		return nil, err
	}
	return s3blob.OpenBucket(ctx, s3.NewFromConfig(cfg, opts...), u.Host,
		&s3blob.Options{RequestChecksumCalculation: cfg.RequestChecksumCalculation})
}
