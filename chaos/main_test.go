package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aetheriot/aether-audit/internal/pgcluster"
)

var (
	// aetherBin is the binary built for this test run.
	aetherBin string
	// shared is the private cluster of every test that does not stop
	// PostgreSQL; each test has a database of its own on it.
	shared *pgcluster.Cluster
)

// TestMain builds `aether` and starts the shared private cluster, then runs
// the tests.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	work, err := os.MkdirTemp("", "aether-chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating work folder:", err)
		return 1
	}
	defer os.RemoveAll(work)
	// The cluster may run as an unprivileged user: it must reach the folder.
	if err := os.Chmod(work, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	aetherBin = filepath.Join(work, "aether")
	build := exec.Command("go", "build", "-o", aetherBin, "../cmd/aether")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building aether: %v\n%s", err, out)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	shared, err = pgcluster.Start(ctx, pgcluster.Options{DataDir: filepath.Join(work, "pg"), Database: "postgres"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting PostgreSQL:", err)
		return 1
	}
	defer func() { _ = shared.Stop(context.Background()) }()
	return m.Run()
}

// baseEnv is the test's environment without any setting of aether, so that
// the processes see only what a test gives them.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AETHER_") || strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "PG") {
			continue
		}
		env = append(env, kv)
	}
	return env
}
