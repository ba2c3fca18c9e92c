// Package checkpoint signs and verifies Aether's audit checkpoints: a
// project's chain head (sequence and chain hash) signed with an Ed25519 key
// as a compact JWS (RFC 7515, alg EdDSA per RFC 8037), chained to the
// previous checkpoint of the project by the SHA-256 of its JWS text.
//
// The package holds no database code. KeyRing is the signing key and the
// retired public keys that still verify (keyring.go); ParsePrivateKey and
// ParsePublicKeys read keys from files or environment values (keys.go);
// Payload is the signed JSON (payload.go); Sign, Verify and Parse handle the
// JWS (jws.go); JWKS publishes the public keys (jwks.go). docs/audit-chain.md
// ("Signed checkpoints") specifies the format.
package checkpoint
