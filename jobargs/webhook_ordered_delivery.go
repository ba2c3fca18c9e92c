package jobargs

import "github.com/google/uuid"

// WebhookOrderedDeliveryArgs asks for the next deliveries of a subscription
// with ordering SEQUENCE, sent one after the other in the order of its
// queue by whichever process holds the subscription's lock (see
// app.App.DeliverOrderedWebhooks). Any number of these jobs may exist for
// one subscription: each does what is due when it runs.
type WebhookOrderedDeliveryArgs struct {
	TenantID       string    `json:"tenant_id"`
	SubscriptionID uuid.UUID `json:"subscription_id"`
}

// Kind implements river.JobArgs.
func (WebhookOrderedDeliveryArgs) Kind() string { return "webhook_ordered_delivery" }
