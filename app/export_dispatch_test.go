package app

// WebhookDispatchRunning tells tests that RunWebhookDispatch has taken over
// this App's recordings.
func (a *App) WebhookDispatchRunning() bool { return a.dispatch.Load() != nil }
