// Package verify checks an NDJSON audit export offline, with no server and
// no database: it rebuilds every event from its line, recomputes its
// canonical encoding and chain hash with the domain package's own
// functions, checks that the sequences are dense and the chain links, and
// checks the file's last event against a signed checkpoint (a compact JWS,
// EdDSA) and the JSON Web Key Set of the checkpoint keys.
//
// Run is the whole check as the `aether verify` command runs it: it writes
// one line per problem ("line N: sequence S: <problem>") and a summary, and
// returns the exit code (ExitOK, ExitFailed, ExitUsage). See
// docs/audit-chain.md, "Verifying an export offline".
package verify
