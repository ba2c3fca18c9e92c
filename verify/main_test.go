package verify_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// aetherBin is the aether binary TestMain builds: the tests run `aether
// verify` through its real entry point (kong parsing, exit codes).
var aetherBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "aether-verify-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	aetherBin = filepath.Join(dir, "aether")
	build := exec.Command("go", "build", "-o", aetherBin, "../cmd/aether")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building aether: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is what one run of a verifier printed and its exit code.
type result struct {
	stdout, stderr string
	code           int
}

// runCmd runs a command to completion.
func runCmd(t testing.TB, name string, args ...string) result {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running %s: %v", name, err)
	}
	return result{stdout.String(), stderr.String(), code}
}

// aetherVerify runs `aether verify args...`.
func aetherVerify(t testing.TB, args ...string) result {
	t.Helper()
	return runCmd(t, aetherBin, append([]string{"verify"}, args...)...)
}

// problemLine matches a line's problem: "line N: sequence S: ...".
var problemLine = regexp.MustCompile(`(?m)^line (\d+): sequence (\S+): `)

// problemLines returns the "N:S" of every line problem printed.
func problemLines(out string) []string {
	var got []string
	for _, m := range problemLine.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		got = append(got, strconv.Itoa(n)+":"+m[2])
	}
	return got
}
