package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/aetheriot/aether-audit/checkpoint"
	"github.com/aetheriot/aether-audit/secrets"
)

// checkpointFlags configure the key that signs audit checkpoints and how
// often they are signed.
type checkpointFlags struct {
	CheckpointKeyFile     string        `name:"checkpoint-key-file" env:"AETHER_CHECKPOINT_KEY_FILE" help:"File holding the Ed25519 key that signs audit checkpoints: PEM PKCS #8 (openssl genpkey -algorithm ed25519), or the 32-byte seed in hex or base64. Required without --dev unless AETHER_CHECKPOINT_KEY is set; with --dev, one is generated into <data-dir>/checkpoint-key."`
	CheckpointKey         string        `name:"checkpoint-key" env:"AETHER_CHECKPOINT_KEY" help:"The checkpoint signing key itself, in a form --checkpoint-key-file accepts (prefer the environment variable to the flag, which other users may see)."`
	CheckpointRetiredKeys []string      `name:"checkpoint-retired-keys" env:"AETHER_CHECKPOINT_RETIRED_KEYS" help:"Files (comma-separated) of retired checkpoint public keys, published with the current one so that older checkpoints still verify: a JWKS, PEM public keys (openssl pkey -pubout), or a 32-byte key in hex or base64."`
	CheckpointInterval    time.Duration `name:"checkpoint-interval" env:"AETHER_CHECKPOINT_INTERVAL" default:"1h" help:"How often a checkpoint is signed for every project with events since its latest one."`
}

// errNoCheckpointKey refuses to serve in production without a checkpoint
// key an operator chose.
var errNoCheckpointKey = errors.New("no checkpoint key is configured: set --checkpoint-key-file (AETHER_CHECKPOINT_KEY_FILE) " +
	"or AETHER_CHECKPOINT_KEY to an Ed25519 key (openssl genpkey -algorithm ed25519 -out checkpoint-key.pem), " +
	"or --dev (AETHER_DEV=true) to generate one into the data dir")

// keyRing builds the checkpoint key ring: the signing key from the flag,
// the environment or (only in development mode) the data dir, and the
// retired public keys.
func (f checkpointFlags) keyRing(dev bool, dir dataDirFlags, logger *slog.Logger) (*checkpoint.KeyRing, error) {
	var (
		key ed25519.PrivateKey
		err error
	)
	switch {
	case f.CheckpointKeyFile != "" && f.CheckpointKey != "":
		return nil, errors.New("set either --checkpoint-key-file (AETHER_CHECKPOINT_KEY_FILE) or AETHER_CHECKPOINT_KEY, not both")
	case f.CheckpointKey != "":
		if key, err = checkpoint.ParsePrivateKey([]byte(f.CheckpointKey)); err != nil {
			return nil, fmt.Errorf("AETHER_CHECKPOINT_KEY: %w", err)
		}
	case f.CheckpointKeyFile != "":
		data, err := os.ReadFile(f.CheckpointKeyFile)
		if err != nil {
			return nil, fmt.Errorf("reading the checkpoint key: %w", err)
		}
		if key, err = checkpoint.ParsePrivateKey(data); err != nil {
			return nil, fmt.Errorf("%s: %w", f.CheckpointKeyFile, err)
		}
	case !dev:
		return nil, errNoCheckpointKey
	default:
		if err := os.MkdirAll(dir.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("creating data dir: %w", err)
		}
		path := filepath.Join(dir.DataDir, "checkpoint-key")
		seed, err := secrets.LoadOrCreateKeyFile(path, "checkpoint key", ed25519.SeedSize)
		if err != nil {
			return nil, err
		}
		key = ed25519.NewKeyFromSeed(seed[:ed25519.SeedSize])
		logger.Warn("development mode: signing audit checkpoints with the key generated into the data dir; give production its own key", "file", path)
	}
	var retired []ed25519.PublicKey
	for _, file := range f.CheckpointRetiredKeys {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading retired checkpoint keys: %w", err)
		}
		keys, err := checkpoint.ParsePublicKeys(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		retired = append(retired, keys...)
	}
	ring, err := checkpoint.NewKeyRing(key, retired...)
	if err != nil {
		return nil, err
	}
	logger.Info("signing audit checkpoints", "key_id", ring.KeyID(), "retired_keys", len(ring.PublicKeys())-1, "interval", f.CheckpointInterval)
	return ring, nil
}
