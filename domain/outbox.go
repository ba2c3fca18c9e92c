package domain

import "time"

// OutboxJob is background work committed in the same transaction as the
// fact it acts on (River jobs, inserted with InsertTx): it exists exactly when
// the fact does, and runs only after commit.
type OutboxJob struct {
	// Args are the job's arguments; Kind names the worker. They are stored
	// as JSON.
	Args interface{ Kind() string }
	// Queue is the River queue; empty means the default queue.
	Queue string
	// ScheduledAt delays the job; zero means run at once.
	ScheduledAt time.Time
	// MaxAttempts bounds River's own retries of the job; zero means River's
	// default.
	MaxAttempts int
}
