package verify

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

const (
	// keysFetchTimeout bounds the download of a key set from a URL.
	keysFetchTimeout = 15 * time.Second
	// maxKeysBytes is the largest key set read.
	maxKeysBytes = 1 << 20
)

// keySet is the checkpoint public keys of a JSON Web Key Set by key id:
// the service's current key and the retired ones it still publishes.
type keySet map[string][]ed25519.PublicKey

// loadKeys reads a JWKS ({"keys":[{"kty":"OKP","crv":"Ed25519","kid",
// "x",...}]}) from a file, or from an http(s) URL fetched once (e.g. the
// server's /.well-known/aether/checkpoint-keys). Keys of other types are
// ignored; a key set that cannot be read is an *InputError.
func loadKeys(ctx context.Context, src string, client *http.Client) (keySet, error) {
	var (
		body []byte
		err  error
	)
	if strings.HasPrefix(src, "https://") || strings.HasPrefix(src, "http://") {
		body, err = fetchKeys(ctx, src, client)
	} else {
		body, err = readFileLimited(src, maxKeysBytes)
	}
	if err != nil {
		return nil, &InputError{"keys", err}
	}
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &raw); err != nil || raw.Keys == nil {
		return nil, &InputError{"keys", fmt.Errorf("%s is not a JSON Web Key Set ({\"keys\":[...]})", src)}
	}
	ks := keySet{}
	for _, k := range raw.Keys {
		var jwk jose.JSONWebKey
		if err := jwk.UnmarshalJSON(k); err != nil {
			continue // a key type this verifier does not know
		}
		if pub, ok := jwk.Public().Key.(ed25519.PublicKey); ok && jwk.KeyID != "" {
			ks[jwk.KeyID] = append(ks[jwk.KeyID], pub)
		}
	}
	return ks, nil
}

// fetchKeys downloads a key set with a timeout.
func fetchKeys(ctx context.Context, url string, client *http.Client) ([]byte, error) {
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, keysFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeysBytes+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if len(body) > maxKeysBytes {
		return nil, fmt.Errorf("GET %s: larger than %d bytes", url, maxKeysBytes)
	}
	return body, nil
}

// readFileLimited reads a small file, refusing one larger than limit.
func readFileLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return b, nil
}
