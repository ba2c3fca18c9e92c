package app

import "context"

// maxTxAttempts bounds the retries of a transaction that lost a race (a
// concurrent insert of the same event id or idempotency key).
const maxTxAttempts = 4

// retryTx runs fn in a transaction, again when it lost a race that a fresh
// attempt resolves.
func (a *App) retryTx(ctx context.Context, fn func(ctx context.Context) error) error {
	var err error
	for attempt := 1; attempt <= maxTxAttempts; attempt++ {
		err = a.store.InTx(ctx, fn)
		if err == nil || !a.store.IsRetryable(err) || ctx.Err() != nil {
			return err
		}
	}
	return err
}
