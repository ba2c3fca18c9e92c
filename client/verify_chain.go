package client

import (
	"context"
	"strconv"
)

// ChainVerification is the result of [Client.VerifyChain].
type ChainVerification struct {
	// Valid is true when every event of the range recomputed to its stored
	// hash and every stored checkpoint of the range verified.
	Valid        bool
	CheckedCount uint64
	// FirstInvalidSequence is the first event whose content no longer
	// matches its chain (0 when none).
	FirstInvalidSequence uint64
	HeadSequence         uint64
	HeadHash             string
	// PurgedThroughSequence is the last sequence removed by retention (0
	// when none was); verification starts after it.
	PurgedThroughSequence uint64
	CheckpointsChecked    uint64
	// FirstInvalidCheckpointSequence is the first stored checkpoint that
	// failed (0 when none).
	FirstInvalidCheckpointSequence uint64
}

const verifyChain = `query($p: ID!, $from: Uint64, $to: Uint64, $resume: String) {
verifyAuditChain(projectId: $p, fromSequence: $from, toSequence: $to, resumeToken: $resume) {
valid complete resumeToken checkedCount firstInvalidSequence headSequence headHash purgedThroughSequence
checkpointsChecked firstInvalidCheckpointSequence } }`

// VerifyChain recomputes the hash chain of a project's events from
// fromSequence to toSequence (0 for either: from the start, to the head)
// and checks the stored checkpoints. The server verifies at most 1,000,000
// events per call; VerifyChain follows its resume tokens call after call
// until the whole range is verified, and returns the last call's result.
func (c *Client) VerifyChain(ctx context.Context, projectID string, fromSequence, toSequence uint64) (ChainVerification, error) {
	vars := map[string]any{"p": projectID}
	if fromSequence > 0 {
		vars["from"] = strconv.FormatUint(fromSequence, 10)
	}
	if toSequence > 0 {
		vars["to"] = strconv.FormatUint(toSequence, 10)
	}
	for {
		var out struct {
			VerifyAuditChain struct {
				Valid                          bool
				Complete                       bool
				ResumeToken                    *string
				CheckedCount                   uint64 `json:",string"`
				FirstInvalidSequence           *string
				HeadSequence                   uint64 `json:",string"`
				HeadHash                       string
				PurgedThroughSequence          uint64 `json:",string"`
				CheckpointsChecked             uint64 `json:",string"`
				FirstInvalidCheckpointSequence *string
			}
		}
		if err := c.do(ctx, query, verifyChain, vars, &out); err != nil {
			return ChainVerification{}, err
		}
		v := out.VerifyAuditChain
		if !v.Complete && v.ResumeToken != nil {
			vars = map[string]any{"p": projectID, "resume": *v.ResumeToken}
			continue
		}
		return ChainVerification{
			Valid: v.Valid, CheckedCount: v.CheckedCount, HeadSequence: v.HeadSequence, HeadHash: v.HeadHash,
			PurgedThroughSequence: v.PurgedThroughSequence, CheckpointsChecked: v.CheckpointsChecked,
			FirstInvalidSequence:           optionalUint(v.FirstInvalidSequence),
			FirstInvalidCheckpointSequence: optionalUint(v.FirstInvalidCheckpointSequence),
		}, nil
	}
}

// optionalUint is a nullable Uint64, 0 for null.
func optionalUint(s *string) uint64 {
	if s == nil {
		return 0
	}
	n, _ := strconv.ParseUint(*s, 10, 64)
	return n
}
