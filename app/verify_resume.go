package app

import (
	"encoding/base64"
	"encoding/json"

	"github.com/aetheriot/aether-audit/domain"
)

// verifyResume is where a VerifyAuditChain call stopped at its budget: the
// next sequence to recompute, the end of the range, the hash recomputed
// through the one before it, and the counts so far. Its token is opaque to
// clients (base64url of JSON). It is not signed: it binds nothing but the
// caller's own verification, which it can only make fail, and it is checked
// against the project it is given for, scoped by the caller's identity like
// any range.
type verifyResume struct {
	Project     string      `json:"p"`
	Next        uint64      `json:"n"`
	To          uint64      `json:"t"`
	Prev        domain.Hash `json:"-"`
	PrevHex     string      `json:"h"`
	Checked     uint64      `json:"c"`
	Checkpoints uint64      `json:"k"`
}

// maxVerifyResumeToken bounds the token a call decodes.
const maxVerifyResumeToken = 1024

func (r verifyResume) encode() string {
	r.PrevHex = r.Prev.String()
	// Fixed fields of plain types: encoding cannot fail.
	b, _ := json.Marshal(r)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeVerifyResume parses a token made by encode for projectID.
func decodeVerifyResume(token, projectID string) (verifyResume, error) {
	bad := badInput("resumeToken", "is not a resume token of this project's verification")
	if len(token) > maxVerifyResumeToken {
		return verifyResume{}, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return verifyResume{}, bad
	}
	var r verifyResume
	if err := json.Unmarshal(raw, &r); err != nil || r.Project != projectID || r.Next < 2 || r.Next > r.To {
		return verifyResume{}, bad
	}
	if r.Prev, err = domain.ParseHash(r.PrevHex); err != nil {
		return verifyResume{}, bad
	}
	return r, nil
}
