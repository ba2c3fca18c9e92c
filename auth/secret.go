package auth

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// generatedSecretLen is the length in bytes of the secrets
// LoadOrCreateSecret creates.
const generatedSecretLen = 32

// LoadOrCreateSecret returns the HS256 secret kept in the file at path,
// creating the file first if it does not exist.
//
// The file holds the secret hex-encoded (lower or upper case), optionally
// surrounded by white space such as a trailing newline; it must decode to
// at least MinSecretLen bytes. An existing file that does not is an error
// and is left untouched.
//
// A missing file is created with MinSecretLen random bytes from
// crypto/rand, written hex-encoded with a trailing newline and file mode
// 0600; a missing parent directory is created with mode 0700. Creation is
// atomic: the secret is written to a temporary file in the same directory,
// synced, and hard-linked to path, which fails rather than replacing a file
// created in the meantime. Processes or goroutines racing to create the
// file therefore all return the secret of the one that linked first, and no
// reader ever sees a partial file. The file system must support hard links.
func LoadOrCreateSecret(path string) ([]byte, error) {
	secret, err := readSecretFile(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return secret, err
	}

	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("auth: create JWT secret directory: %w", err)
	}
	secret = make([]byte, generatedSecretLen)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("auth: generate JWT secret: %w", err)
	}

	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("auth: create JWT secret file: %w", err)
	}
	// The temporary name is removed in every case; after a successful
	// link, path keeps the file alive.
	defer os.Remove(tmp.Name())
	if err := writeSecretFile(tmp, secret); err != nil {
		return nil, fmt.Errorf("auth: write JWT secret file: %w", err)
	}

	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another process or goroutine created the file first:
			// use its secret.
			return readSecretFile(path)
		}
		return nil, fmt.Errorf("auth: install JWT secret file: %w", err)
	}
	return secret, nil
}

// writeSecretFile writes secret hex-encoded to f with mode 0600, syncs and
// closes f.
func writeSecretFile(f *os.File, secret []byte) error {
	err := f.Chmod(0o600)
	if err == nil {
		_, err = f.WriteString(hex.EncodeToString(secret) + "\n")
	}
	if err == nil {
		err = f.Sync()
	}
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	return err
}

// readSecretFile reads and decodes the secret file at path. An error wraps
// fs.ErrNotExist if the file does not exist. Decoding errors do not include
// the file's content.
func readSecretFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: read JWT secret file: %w", err)
	}
	secret, err := hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Errorf("auth: JWT secret file %s is not hex-encoded", path)
	}
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("auth: JWT secret file %s holds %d bytes, want at least %d", path, len(secret), MinSecretLen)
	}
	return secret, nil
}

// ParseSecret returns the HS256 secret given as s, typically the value of
// the AETHER_JWT_SECRET environment variable. The bytes of s are the secret
// as they are: no decoding and no trimming takes place. s must be at least
// MinSecretLen bytes long; the error for a shorter s does not include it.
func ParseSecret(s string) ([]byte, error) {
	if len(s) < MinSecretLen {
		return nil, fmt.Errorf("auth: JWT secret is %d bytes, want at least %d", len(s), MinSecretLen)
	}
	return []byte(s), nil
}
