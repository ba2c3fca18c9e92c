package jobargs

// QueueWebhooks is the River queue of webhook deliveries, kept apart from
// other work so that slow receivers cannot delay it.
const QueueWebhooks = "webhooks"

// QueueExports is the River queue of export runs, apart from other work so
// that long exports cannot hold up webhooks.
const QueueExports = "exports"
