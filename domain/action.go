package domain

import "strings"

// MaxActionLength is the longest accepted audit action name, in bytes.
const MaxActionLength = 128

// ValidateAction checks an audit action name: a dotted lower-case name of two
// to eight segments ([a-z][a-z0-9_-]*), at most MaxActionLength bytes. Actions
// later double as webhook event types.
func ValidateAction(field, action string) error {
	if action == "" {
		return invalid(field, "is required")
	}
	if len(action) > MaxActionLength {
		return invalid(field, "must be at most %d bytes", MaxActionLength)
	}
	if !isAction(action) {
		return invalid(field, "must be a dotted lower-case name such as device.firmware.updated")
	}
	return nil
}

// ActionPattern matches audit actions: either one exact action or, written
// "prefix.*", every action that starts with "prefix.". The zero value matches
// nothing; use ParseActionPattern.
type ActionPattern struct {
	exact  string
	prefix string // with the trailing dot
}

// ParseActionPattern validates s as an exact action or "prefix.*" where prefix
// is one or more action segments.
func ParseActionPattern(field, s string) (ActionPattern, error) {
	if base, ok := strings.CutSuffix(s, ".*"); ok {
		// A prefix may be a single segment ("device.*"), so validate it with
		// a dummy last segment appended.
		if err := ValidateAction(field, base+".x"); err != nil {
			return ActionPattern{}, invalid(field, "must be an action or a prefix such as device.*")
		}
		return ActionPattern{prefix: base + "."}, nil
	}
	if err := ValidateAction(field, s); err != nil {
		return ActionPattern{}, invalid(field, "must be an action or a prefix such as device.*")
	}
	return ActionPattern{exact: s}, nil
}

// Matches reports whether action is matched by the pattern.
func (p ActionPattern) Matches(action string) bool {
	if p.prefix != "" {
		return strings.HasPrefix(action, p.prefix)
	}
	return p.exact != "" && action == p.exact
}

// Exact returns the exact action, or "" for a prefix pattern.
func (p ActionPattern) Exact() string { return p.exact }

// Prefix returns the prefix including its trailing dot ("device."), or "" for
// an exact pattern.
func (p ActionPattern) Prefix() string { return p.prefix }

// String returns the pattern as written.
func (p ActionPattern) String() string {
	if p.prefix != "" {
		return p.prefix + "*"
	}
	return p.exact
}
