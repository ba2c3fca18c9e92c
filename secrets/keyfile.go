package secrets

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

// LoadOrCreateKeyFile returns the key kept hex-encoded in the file at path,
// creating the file with size random bytes first if it does not exist. name
// says what the key is in errors ("JWT secret", "master key"); errors never
// include the file's content.
//
// The file holds the key hex-encoded (lower or upper case), optionally
// surrounded by white space such as a trailing newline; it must decode to at
// least size bytes. An existing file that does not is an error and is left
// untouched.
//
// A missing file is created with mode 0600 (a missing parent directory with
// mode 0700). Creation is atomic: the key is written to a temporary file in
// the same directory, synced, and hard-linked to path, which fails rather
// than replacing a file created in the meantime. Processes racing to create
// the file therefore all return the key of the one that linked first, and
// no reader ever sees a partial file. The file system must support hard
// links.
func LoadOrCreateKeyFile(path, name string, size int) ([]byte, error) {
	key, err := readKeyFile(path, name, size)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}

	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s directory: %w", name, err)
	}
	key = make([]byte, size)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generate %s: %w", name, err)
	}

	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("create %s file: %w", name, err)
	}
	// The temporary name is removed in every case; after a successful
	// link, path keeps the file alive.
	defer os.Remove(tmp.Name())
	if err := writeKeyFile(tmp, key); err != nil {
		return nil, fmt.Errorf("write %s file: %w", name, err)
	}

	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another process or goroutine created the file first: use its key.
			return readKeyFile(path, name, size)
		}
		return nil, fmt.Errorf("install %s file: %w", name, err)
	}
	return key, nil
}

// writeKeyFile writes key hex-encoded to f with mode 0600, syncs and closes f.
func writeKeyFile(f *os.File, key []byte) error {
	err := f.Chmod(0o600)
	if err == nil {
		_, err = f.WriteString(hex.EncodeToString(key) + "\n")
	}
	if err == nil {
		err = f.Sync()
	}
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	return err
}

// readKeyFile reads and decodes the key file at path. An error wraps
// fs.ErrNotExist if the file does not exist.
func readKeyFile(path, name string, size int) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s file: %w", name, err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Errorf("%s file %s is not hex-encoded", name, path)
	}
	if len(key) < size {
		return nil, fmt.Errorf("%s file %s holds %d bytes, want at least %d", name, path, len(key), size)
	}
	return key, nil
}
