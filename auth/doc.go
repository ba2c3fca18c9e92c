// Package auth turns bearer JSON Web Tokens into verified [app.Identity]
// values and mints tokens for local development.
//
// # Tokens
//
// A token is a signed JWT whose claims are:
//
//   - "sub": the caller's subject; a non-blank string, required.
//   - "tenant_id": the tenant every read and write is scoped to; a non-blank
//     string, required.
//   - "project_ids": a non-empty array of non-blank strings, required. The
//     entry [app.AllProjects] ("*") grants every project of the tenant.
//   - "permissions": an array of non-blank strings, optional. Every entry
//     becomes an [app.Permission], including names this version does not
//     know, so that tokens minted for newer versions keep their meaning.
//   - "exp": the expiry time, required.
//   - "iat", "nbf": checked when present; a token issued or becoming valid
//     in the future (beyond the clock-skew leeway) is refused.
//   - "iss", "aud": checked when the [Verifier] is configured with an issuer
//     or audience, and then required.
//
// # Verification
//
// A [Verifier] accepts tokens signed with exactly one key source: a shared
// HMAC secret (HS256, for local use) or a JSON Web Key Set fetched from a URL
// (RS256, RS384, RS512, ES256, ES384, for production). Only the algorithms
// of the configured key source are accepted, so unsigned tokens ("alg":
// "none") and algorithm-confusion attacks (an HS256 token signed with an
// RSA public key) are refused before any key is looked up.
//
// Every verification failure wraps [ErrInvalidToken]; an expired token also
// wraps [ErrTokenExpired]. Error messages are short, fixed texts such as
// "token expired" or "token signature invalid": they never contain the
// token, its claims or key material, so they are safe to log and to return
// to clients.
//
// # Local secrets
//
// [LoadOrCreateSecret] keeps the HS256 secret of a development installation
// in a file, creating it on first use; [ParseSecret] accepts a secret given
// in the AETHER_JWT_SECRET environment variable. [MintHS256] mints tokens
// with such a secret. Nothing in this package logs tokens or secrets.
package auth
