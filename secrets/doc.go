// Package secrets keeps secrets at rest: a Box seals values (webhook signing
// secrets) with AES-256-GCM under the service's master key, and key files
// hold generated keys of a local installation (the master key, the HS256
// secret of development tokens).
//
// A sealed value is nonce || ciphertext || tag. Each is bound to the record
// it belongs to by associated data (for a signing secret: its destination
// and secret ids), so a sealed value copied to another row does not open.
// Nothing in this package logs or returns plaintext in errors.
package secrets
