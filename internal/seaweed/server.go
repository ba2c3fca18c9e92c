package seaweed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Credentials of the one S3 identity a Server creates (SeaweedFS's mini
// mode reads them from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY at
// start). Clients find them through the standard AWS credentials chain:
// Env gives the variables.
const (
	AccessKeyID     = "aether-test"
	SecretAccessKey = "aether-test-secret-key"
	// Region is the region clients name; SeaweedFS accepts any.
	Region = "us-east-1"
)

// Options configure Start.
type Options struct {
	// Dir holds the server's data and log (weed.log); required.
	Dir string
	// Bucket is created at start; required.
	Bucket string
	// Log receives build progress when the binary is built first; nil
	// discards it.
	Log *bytes.Buffer
}

// Server is a running `weed mini` serving S3 on 127.0.0.1.
type Server struct {
	// Endpoint is the S3 endpoint, "http://127.0.0.1:<port>".
	Endpoint string
	// Bucket is the bucket created at start.
	Bucket string

	cmd      *exec.Cmd
	done     chan struct{}
	stopOnce sync.Once
	logPath  string
}

// Env is the environment a client process needs to reach the server with
// the standard AWS credentials chain.
func Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + SecretAccessKey, "AWS_REGION=" + Region}
}

// BucketURL is the gocloud.dev/blob URL of the server's bucket: path-style
// requests over plain HTTP to the loopback endpoint, credentials from the
// environment (Env).
func (s *Server) BucketURL() string {
	q := url.Values{}
	q.Set("endpoint", s.Endpoint)
	q.Set("region", Region)
	q.Set("use_path_style", "true")
	q.Set("disable_https", "true")
	return "s3://" + s.Bucket + "?" + q.Encode()
}

// startAttempts bounds the retries of Start when a port it picked was taken
// in the meantime by someone else.
const startAttempts = 3

// readyTimeout bounds how long Start waits for S3 to answer.
const readyTimeout = 90 * time.Second

// Start finds or builds the weed binary (Binary) and starts `weed mini`
// with every listener on a free port of 127.0.0.1 (the ones a test does not
// need turned off), waiting until the bucket answers S3 requests. The
// server dies with the calling process (Pdeathsig) as well as at Stop.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Dir == "" || opts.Bucket == "" {
		return nil, errors.New("seaweed: Start needs a Dir and a Bucket")
	}
	var log *bytes.Buffer = opts.Log
	if log == nil {
		log = &bytes.Buffer{}
	}
	bin, err := Binary(ctx, log)
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		s, err := start(ctx, bin, opts, attempt)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// start makes one attempt of Start.
func start(ctx context.Context, bin string, opts Options, attempt int) (*Server, error) {
	ports, err := freePorts(9)
	if err != nil {
		return nil, err
	}
	dataDir := filepath.Join(opts.Dir, "data-"+strconv.Itoa(attempt))
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(opts.Dir, "weed.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	p := func(i int) string { return strconv.Itoa(ports[i]) }
	args := []string{"mini",
		"-dir", dataDir, "-ip", "127.0.0.1", "-ip.bind", "127.0.0.1",
		"-bucket", opts.Bucket,
		"-master.port", p(0), "-master.port.grpc", p(1),
		"-volume.port", p(2), "-volume.port.grpc", p(3),
		"-filer.port", p(4), "-filer.port.grpc", p(5),
		"-s3.port", p(6), "-s3.port.grpc", p(7),
		"-admin.port", p(8), "-admin.ui=false", "-admin.port.legacy", "0",
		"-s3.port.iceberg", "0", "-s3.port.lance", "0",
		"-webdav=false", "-master.telemetry=false",
		"-filer.localSocket", filepath.Join(opts.Dir, "filer-"+p(4)+".sock"),
		"-s3.localSocket", filepath.Join(opts.Dir, "s3-"+p(6)+".sock"),
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dataDir
	cmd.Env = append(os.Environ(), Env()...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("seaweed: starting %s: %w", bin, err)
	}
	s := &Server{Endpoint: "http://127.0.0.1:" + p(6), Bucket: opts.Bucket, cmd: cmd, done: make(chan struct{}), logPath: logPath}
	go func() { _ = cmd.Wait(); close(s.done) }()
	if err := s.waitReady(ctx); err != nil {
		s.Stop()
		return nil, fmt.Errorf("%w (log: %s)", err, logPath)
	}
	return s, nil
}

// waitReady polls the bucket with a signed HeadBucket until S3 answers 200
// for it: an unsigned request can be refused before the bucket exists, and
// "S3 ready" in the log comes before the bucket is created.
func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	client := s3.New(s3.Options{
		Region: Region, BaseEndpoint: aws.String(s.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
	})
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		hctx, hcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := client.HeadBucket(hctx, &s3.HeadBucketInput{Bucket: aws.String(s.Bucket)})
		hcancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return errors.New("seaweed: weed mini exited before it served S3")
		case <-ctx.Done():
			return fmt.Errorf("seaweed: S3 at %s did not answer for bucket %s: %w (last: %v)", s.Endpoint, s.Bucket, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// Stop kills the server's process group and waits for it to exit. It may be
// called more than once.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		if s.cmd.Process != nil {
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		}
		<-s.done
	})
}

// Pause stops the server's processes (SIGSTOP) without ending them: S3
// accepts connections but answers nothing, as a hung server, until Resume.
func (s *Server) Pause() error { return syscall.Kill(-s.cmd.Process.Pid, syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return syscall.Kill(-s.cmd.Process.Pid, syscall.SIGCONT) }

// Log returns the server's log, for a failing test's output.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

// freePorts returns n distinct ports of 127.0.0.1 that were free a moment
// ago: all held open at once, then released.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("seaweed: finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
