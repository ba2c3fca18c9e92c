package domain

import "time"

// AuditCheckpoint is a signed checkpoint of a project's chain: the chain
// hash at Sequence, signed by the service's checkpoint key as a compact
// JWS, and linked to the checkpoint of the project issued before it.
type AuditCheckpoint struct {
	TenantID  string
	ProjectID string
	Sequence  uint64
	// IssueNumber counts the project's checkpoints in the order they were
	// issued (1 for the first), the order PreviousCheckpoint links them in.
	IssueNumber uint64
	ChainHash   Hash
	// PurgedThrough and AnchorHash are the project's purged prefix when the
	// checkpoint was signed (0 and the zero hash when none).
	PurgedThrough uint64
	AnchorHash    Hash
	// PreviousCheckpoint is the SHA-256 of the JWS of the checkpoint issued
	// before this one; nil for the first.
	PreviousCheckpoint *Hash
	// JWSDigest is the SHA-256 of JWS.
	JWSDigest Hash
	KeyID     string
	JWS       string
	IssuedAt  time.Time
}

// CheckpointCandidate is a project whose head is past its highest
// checkpoint.
type CheckpointCandidate struct {
	TenantID, ProjectID string
	HeadSequence        uint64
}

// StoredCheckpoint is a checkpoint's JWS as stored, with the JWS of the
// checkpoint issued just before it (nil when there is none), as chain
// verification reads them.
type StoredCheckpoint struct {
	Sequence    uint64
	IssueNumber uint64
	JWS         string
	PreviousJWS *string
}

// ExportCheckpoint is the checkpoint an AUDIT export recorded at its last
// exported sequence.
type ExportCheckpoint struct {
	Sequence uint64
	JWS      string
}
