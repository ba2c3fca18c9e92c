package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/export"
)

// exportFlags configure data exports.
type exportFlags struct {
	BlobURL          string        `name:"blob-url" env:"AETHER_BLOB_URL" help:"Object storage of exports (gocloud.dev/blob URL): file:///dir, or s3://bucket?region=... with the standard AWS credentials. Default file://<data-dir>/exports."`
	ExportMaxRange   time.Duration `name:"export-max-range" env:"AETHER_EXPORT_MAX_RANGE" default:"744h" help:"Longest time range of one export (default 31 days)."`
	ExportMaxBytes   uint64        `name:"export-max-bytes" env:"AETHER_EXPORT_MAX_BYTES" default:"5368709120" help:"Largest stored export, in bytes (default 5 GiB); a larger export fails with a reason."`
	ExportMaxActive  int           `name:"export-max-active" env:"AETHER_EXPORT_MAX_ACTIVE" default:"3" help:"Most queued or running exports per tenant."`
	ExportTTL        time.Duration `name:"export-ttl" env:"AETHER_EXPORT_TTL" default:"168h" help:"How long a ready export lasts before it expires and its object is deleted."`
	ExportJobTimeout time.Duration `name:"export-job-timeout" env:"AETHER_EXPORT_JOB_TIMEOUT" default:"1h" help:"Bound on one run of an export; the run of a process that died is retried no sooner than this after it started."`
	ExportRetention  daysFlag      `name:"export-retention" env:"AETHER_EXPORT_RETENTION" default:"90d" help:"Days an expired export's row is kept (e.g. 90d), as the other retention settings are written, before the expiry job deletes it; its object goes at expiry."`
	DownloadTTL      time.Duration `name:"export-download-ttl" env:"AETHER_EXPORT_DOWNLOAD_TTL" default:"10m" help:"Default lifetime of an export download link (at most 1h)."`
}

// config opens the export bucket and derives the download capability key
// from the master key.
func (f exportFlags) config(ctx context.Context, dir dataDirFlags, masterKey []byte) (app.ExportConfig, error) {
	blobURL := f.BlobURL
	if blobURL == "" {
		abs, err := filepath.Abs(filepath.Join(dir.DataDir, "exports"))
		if err != nil {
			return app.ExportConfig{}, err
		}
		if err := os.MkdirAll(abs, 0o700); err != nil {
			return app.ExportConfig{}, fmt.Errorf("creating export dir: %w", err)
		}
		blobURL = (&url.URL{Scheme: "file", Path: abs}).String()
	}
	bucket, err := export.OpenBucket(ctx, blobURL)
	if err != nil {
		return app.ExportConfig{}, fmt.Errorf("opening export storage: %w", err)
	}
	mac := hmac.New(sha256.New, masterKey)
	mac.Write([]byte("aether export download capability v1"))
	return app.ExportConfig{
		Bucket: bucket, DownloadKey: mac.Sum(nil), MaxRange: f.ExportMaxRange, MaxBytes: f.ExportMaxBytes,
		MaxActive: f.ExportMaxActive, TTL: f.ExportTTL, DownloadTTL: min(f.DownloadTTL, app.MaxDownloadTTL),
		RowRetention: time.Duration(f.ExportRetention) * 24 * time.Hour,
	}, nil
}
