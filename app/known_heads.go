package app

import "sync"

// maxKnownHeads bounds the projects whose heads knownHeads remembers; when
// it is full it starts again from none.
const maxKnownHeads = 10_000

// knownHeads remembers, per project, the head and webhook state that this
// process's last coalesced append committed, for the next append of the
// project to expect (Tx.ExpectAuditHead). A remembered head is a guess
// that the database checks under the head's lock, never trusted: another
// process, or a command of this one, may have moved the head since.
type knownHeads struct {
	mu    sync.Mutex
	heads map[projectKey]lockedHead
}

// get returns the remembered head of key, if any.
func (k *knownHeads) get(key projectKey) (lockedHead, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	h, ok := k.heads[key]
	return h, ok
}

// committed records the outcome of a transaction of key: the head it left
// when it committed, else nothing (its outcome, and so the head, is not
// known).
func (k *knownHeads) committed(key projectKey, head lockedHead, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !ok {
		delete(k.heads, key)
		return
	}
	if k.heads == nil || len(k.heads) >= maxKnownHeads {
		k.heads = map[projectKey]lockedHead{}
	}
	k.heads[key] = head
}
