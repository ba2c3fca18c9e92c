package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/aetheriot/aether-audit/client"
)

// exportCmd groups the commands about data exports.
type exportCmd struct {
	Download exportDownloadCmd `cmd:"" help:"Download a READY data export to a file (or stdout), verifying its SHA-256 and length."`
}

// exportDownloadCmd downloads a READY data export from a running server:
// it looks the export up, mints a download link, streams the object and
// verifies it against the export's digest and length and the response's
// Repr-Digest.
type exportDownloadCmd struct {
	ExportID    string        `arg:"" name:"export-id" help:"Id of a READY data export."`
	Output      string        `name:"output" short:"o" placeholder:"FILE" help:"Where to write the export: a file, an existing folder, or - for stdout. Default: the name the server suggests (export-<id>.<ext>) in the current folder. An existing file is replaced, only once the download is verified; a new file is readable by you only (0600)."`
	URL         string        `name:"url" env:"AETHER_URL" default:"http://127.0.0.1:8080" help:"Base URL of the Aether Audit server."`
	Token       string        `name:"token" env:"AETHER_TOKEN" help:"Bearer token with exports:read and exports:download (prefer the environment variable: flags show in process lists)."`
	LinkTTL     time.Duration `name:"link-ttl" default:"10m" help:"Lifetime of the download link the command mints (1s to 1h)."`
	IdleTimeout time.Duration `name:"idle-timeout" default:"2m" help:"Give up when the server sends nothing for this long."`
	Progress    bool          `name:"progress" default:"true" negatable:"" help:"Show a progress bar on stderr when it is a terminal."`
}

// Run implements `aether export download`.
func (c *exportDownloadCmd) Run(ctx context.Context) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if c.LinkTTL < time.Second || c.LinkTTL > time.Hour {
		return errors.New("--link-ttl must be between 1s and 1h")
	}
	if c.IdleTimeout <= 0 {
		return errors.New("--idle-timeout must be positive")
	}
	if strings.TrimSpace(c.Token) == "" {
		return errors.New("a token is required: --token or AETHER_TOKEN")
	}
	base, err := url.Parse(strings.TrimRight(c.URL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return fmt.Errorf("--url %q is not an http(s) URL", c.URL)
	}
	// The command asks once: a failure is for its user to see and retry.
	api, err := client.New(base.String(), client.Options{Token: c.Token, HTTPClient: &http.Client{Timeout: time.Minute}, MaxAttempts: 1})
	if err != nil {
		return err
	}

	// 1. The export: READY, with the digest and length to verify against.
	export, err := api.DataExport(ctx, c.ExportID)
	if client.ErrorCode(err) == client.CodeNotFound {
		return fmt.Errorf("export %s not found (or not visible to this token's tenant and projects)", c.ExportID)
	}
	if err != nil {
		return fmt.Errorf("export %s: looking it up: %w", c.ExportID, err)
	}
	e := &export
	if err := checkReady(e); err != nil {
		return err
	}
	wantSum, wantLen, err := expectedContent(e)
	if err != nil {
		return err
	}

	// 2. A download link.
	dl, err := api.CreateDataExportDownload(ctx, e.ID, (c.LinkTTL+time.Second-1)/time.Second*time.Second)
	if err != nil {
		return fmt.Errorf("export %s: creating a download link: %w", e.ID, err)
	}
	link, err := url.Parse(dl.URL)
	if err != nil || dl.URL == "" {
		return fmt.Errorf("export %s: the server returned an unusable download link", e.ID)
	}
	link = base.ResolveReference(link)

	// 3. Stream it, hashing and counting, then verify.
	return c.download(ctx, e, link, wantSum, wantLen)
}

// checkReady explains why an export that is not READY cannot be downloaded.
func checkReady(e *client.DataExport) error {
	switch e.State {
	case "READY":
		return nil
	case "QUEUED", "RUNNING":
		return fmt.Errorf("export %s is %s, not READY yet: try again once it is ready", e.ID, e.State)
	case "FAILED":
		reason := "no reason given"
		if e.FailureReason != nil && *e.FailureReason != "" {
			reason = *e.FailureReason
		}
		return fmt.Errorf("export %s FAILED: %s", e.ID, reason)
	case "EXPIRED":
		return fmt.Errorf("export %s has EXPIRED and its data is deleted: request a new export", e.ID)
	default:
		return fmt.Errorf("export %s is %s, not READY", e.ID, e.State)
	}
}

// expectedContent parses a READY export's contentDigest (sha256:<hex>) and
// byteLength.
func expectedContent(e *client.DataExport) (sum []byte, length uint64, err error) {
	if e.ContentDigest == nil || e.ByteLength == nil {
		return nil, 0, fmt.Errorf("export %s is READY but has no contentDigest or byteLength", e.ID)
	}
	hexSum, ok := strings.CutPrefix(*e.ContentDigest, "sha256:")
	if sum, err = hex.DecodeString(hexSum); !ok || err != nil || len(sum) != sha256.Size {
		return nil, 0, fmt.Errorf("export %s: unsupported contentDigest %q (want sha256:<hex>)", e.ID, *e.ContentDigest)
	}
	length = *e.ByteLength
	return sum, length, nil
}

// download GETs the link and writes the verified object to the output.
func (c *exportDownloadCmd) download(ctx context.Context, e *client.DataExport, link *url.URL, wantSum []byte, wantLen uint64) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link.String(), nil)
	if err != nil {
		return fmt.Errorf("export %s: %w", e.ID, unwrapURLError(err))
	}
	// The object's bytes exactly as stored: no transparent decompression.
	req.Header.Set("Accept-Encoding", "identity")
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.ResponseHeaderTimeout = time.Minute
	transport.DisableCompression = true
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		// Never print the link: it is the capability.
		return fmt.Errorf("export %s: downloading: %w", e.ID, unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("export %s: download refused: HTTP %d: %s", e.ID, resp.StatusCode, problemDetail(resp))
	}

	// Check what the response announces before writing anything.
	headerSum, err := reprDigestSHA256(resp.Header.Values("Repr-Digest"))
	if err != nil {
		return fmt.Errorf("export %s: %w", e.ID, err)
	}
	if !bytes.Equal(headerSum, wantSum) {
		return fmt.Errorf("export %s: the response's Repr-Digest (sha256:%x) differs from the export's contentDigest (sha256:%x); nothing was written",
			e.ID, headerSum, wantSum)
	}
	if resp.ContentLength >= 0 && uint64(resp.ContentLength) != wantLen {
		return fmt.Errorf("export %s: the response announces %d bytes but the export has %d; nothing was written", e.ID, resp.ContentLength, wantLen)
	}

	var out *os.File
	var final string
	if c.Output == "-" {
		out = os.Stdout
	} else {
		if final, err = c.target(resp.Header.Get("Content-Disposition"), e); err != nil {
			return err
		}
		// A temporary file next to the target, renamed once verified:
		// the final name never holds a partial download.
		out, err = os.CreateTemp(filepath.Dir(final), "."+filepath.Base(final)+".*.part")
		if err != nil {
			return fmt.Errorf("export %s: creating the output file: %w", e.ID, err)
		}
		renamed := false
		defer func() {
			if !renamed {
				_ = out.Close()
				_ = os.Remove(out.Name())
			}
		}()
		if err := c.copyAndVerify(ctx, cancel, resp, out, e, wantSum, wantLen, headerSum); err != nil {
			return err
		}
		if err := out.Sync(); err != nil {
			return fmt.Errorf("export %s: writing %s: %w", e.ID, out.Name(), err)
		}
		if err := out.Close(); err != nil {
			return fmt.Errorf("export %s: writing %s: %w", e.ID, out.Name(), err)
		}
		if err := os.Rename(out.Name(), final); err != nil {
			return fmt.Errorf("export %s: %w", e.ID, err)
		}
		renamed = true
		fmt.Fprintf(os.Stderr, "export %s: wrote %s (%d bytes, sha256:%x verified)\n", e.ID, final, wantLen, wantSum)
		return nil
	}
	if err := c.copyAndVerify(ctx, cancel, resp, out, e, wantSum, wantLen, headerSum); err != nil {
		return fmt.Errorf("%w (the output on stdout is incomplete or corrupt: discard it)", err)
	}
	fmt.Fprintf(os.Stderr, "export %s: wrote %d bytes to stdout (sha256:%x verified)\n", e.ID, wantLen, wantSum)
	return nil
}

// copyAndVerify streams the body into out, with a progress bar when stderr
// is a terminal, and checks the bytes against the export's byteLength and
// contentDigest and the response's Repr-Digest.
func (c *exportDownloadCmd) copyAndVerify(ctx context.Context, cancel context.CancelCauseFunc, resp *http.Response, out io.Writer,
	e *client.DataExport, wantSum []byte, wantLen uint64, headerSum []byte) error {
	hash := sha256.New()
	var count countingWriter
	writers := []io.Writer{out, hash, &count}
	if c.Progress && term.IsTerminal(int(os.Stderr.Fd())) {
		bar := progressbar.NewOptions64(resp.ContentLength,
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription("downloading"),
			progressbar.OptionShowBytes(true),
			progressbar.OptionShowTotalBytes(true),
			progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(65*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
		defer func() { _ = bar.Finish() }()
		writers = append(writers, bar)
	}
	// A server that stops sending ends the download rather than hanging it.
	idle := time.AfterFunc(c.IdleTimeout, func() { cancel(fmt.Errorf("no data received for %s", c.IdleTimeout)) })
	defer idle.Stop()
	body := &idleResetReader{r: resp.Body, timer: idle, d: c.IdleTimeout}

	if _, err := io.Copy(io.MultiWriter(writers...), body); err != nil {
		if cause := context.Cause(ctx); cause != nil {
			err = cause
		}
		return fmt.Errorf("export %s: download failed after %d of %d bytes: %w", e.ID, count.n, wantLen, unwrapURLError(err))
	}
	sum := hash.Sum(nil)
	removed := ""
	if c.Output != "-" {
		removed = "; the partial download was deleted"
	}
	switch {
	case count.n != wantLen:
		return fmt.Errorf("export %s: length mismatch: received %d bytes, the export has %d (byteLength)%s", e.ID, count.n, wantLen, removed)
	case !bytes.Equal(sum, wantSum):
		return fmt.Errorf("export %s: digest mismatch: received sha256:%x, the export's contentDigest is sha256:%x%s", e.ID, sum, wantSum, removed)
	case !bytes.Equal(sum, headerSum):
		return fmt.Errorf("export %s: digest mismatch: received sha256:%x, the response's Repr-Digest is sha256:%x%s", e.ID, sum, headerSum, removed)
	}
	return nil
}

// target is the output path: --output, a file of the suggested name in
// the --output folder, or the suggested name in the current folder.
func (c *exportDownloadCmd) target(disposition string, e *client.DataExport) (string, error) {
	name := ""
	if _, params, err := mime.ParseMediaType(disposition); err == nil {
		name = safeFileName(params["filename"])
	}
	if name == "" {
		name = safeFileName(defaultExportFileName(e))
	}
	if name == "" {
		return "", fmt.Errorf("export %s: no usable file name: pass -o FILE", e.ID)
	}
	switch {
	case c.Output == "":
		return name, nil
	default:
		if info, err := os.Stat(c.Output); err == nil && info.IsDir() {
			return filepath.Join(c.Output, name), nil
		}
		return c.Output, nil
	}
}

// defaultExportFileName is export-<id>.<format>[.gz].
func defaultExportFileName(e *client.DataExport) string {
	name := "export-" + e.ID + "." + strings.ToLower(e.Format)
	if e.Compression == "GZIP" {
		name += ".gz"
	}
	return name
}

// safeFileName returns name when it is a plain file name (no folders, not
// hidden, no control characters), else "".
func safeFileName(name string) string {
	if name == "" || name == "." || name == ".." || strings.HasPrefix(name, ".") ||
		strings.ContainsAny(name, `/\`) || len(name) > 255 {
		return ""
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return ""
		}
	}
	return name
}

// reprDigestSHA256 returns the sha-256 digest of Repr-Digest field values
// (RFC 9530: a structured-field dictionary of byte sequences, such as
// sha-256=:<base64>:).
func reprDigestSHA256(values []string) ([]byte, error) {
	for _, v := range values {
		for _, member := range strings.Split(v, ",") {
			key, val, ok := strings.Cut(strings.TrimSpace(member), "=")
			if !ok || strings.TrimSpace(key) != "sha-256" {
				continue
			}
			val, _, _ = strings.Cut(val, ";") // parameters
			val = strings.TrimSpace(val)
			if len(val) < 2 || val[0] != ':' || val[len(val)-1] != ':' {
				return nil, fmt.Errorf("malformed Repr-Digest %q", v)
			}
			sum, err := base64.StdEncoding.DecodeString(val[1 : len(val)-1])
			if err != nil || len(sum) != sha256.Size {
				return nil, fmt.Errorf("malformed Repr-Digest %q", v)
			}
			return sum, nil
		}
	}
	return nil, errors.New("the response has no sha-256 Repr-Digest to verify the download against; nothing was written")
}

// problemDetail summarizes an error response: the detail or title of an
// RFC 9457 problem, else the start of the body.
func problemDetail(resp *http.Response) string {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var p struct {
		Title  string `json:"title"`
		Detail string `json:"detail"`
		Code   string `json:"code"`
	}
	if json.Unmarshal(raw, &p) == nil && (p.Detail != "" || p.Title != "") {
		msg := p.Detail
		if msg == "" {
			msg = p.Title
		}
		if p.Code != "" {
			msg = p.Code + ": " + msg
		}
		return msg
	}
	return snippet(raw)
}

// countingWriter counts the bytes written through it.
type countingWriter struct{ n uint64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += uint64(len(p))
	return len(p), nil
}

// idleResetReader postpones timer by d on every read.
type idleResetReader struct {
	r     io.Reader
	timer *time.Timer
	d     time.Duration
}

func (r *idleResetReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.timer.Reset(r.d)
	return n, err
}

// unwrapURLError drops the URL that net/http puts in its errors: a download
// URL is a capability and must not end up in logs.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// snippet is the start of a body, for an error message.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	if s == "" {
		s = "(empty body)"
	}
	return s
}
