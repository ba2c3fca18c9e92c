package client

import (
	"context"
	"time"
)

// WebhookDestination is a registered HTTPS receiver (never its secrets).
type WebhookDestination struct {
	ID              string     `json:"id"`
	ProjectID       string     `json:"projectId"`
	URL             string     `json:"url"`
	Description     string     `json:"description"`
	CreatedAt       time.Time  `json:"createdAt"`
	SecretRotatedAt *time.Time `json:"secretRotatedAt"`
	ActiveSecrets   int        `json:"activeSecrets"`
}

// CreateWebhookDestinationInput registers a receiver.
type CreateWebhookDestinationInput struct {
	ProjectID   string `json:"projectId"`
	URL         string `json:"url"`
	Description string `json:"description,omitempty"`
}

// CreatedWebhookDestination is a new destination and its signing secret
// (whsec_...), shown only now.
type CreatedWebhookDestination struct {
	Destination   WebhookDestination
	SigningSecret string
}

// RotatedWebhookSecret is a destination's new signing secret, shown only
// now, and when the replaced ones stop signing.
type RotatedWebhookSecret struct {
	Destination             WebhookDestination
	SigningSecret           string
	PreviousSecretsExpireAt time.Time
}

// WebhookSubscription subscribes a destination to a project's events.
type WebhookSubscription struct {
	ID            string   `json:"id"`
	ProjectID     string   `json:"projectId"`
	DestinationID string   `json:"destinationId"`
	EventTypes    []string `json:"eventTypes"`
	Description   string   `json:"description"`
	// State is ACTIVE or DISABLED.
	State string `json:"state"`
	// AfterSequence is the sequence of the subscription's creation event:
	// it receives the events after it.
	AfterSequence uint64     `json:"afterSequence,string"`
	CreatedAt     time.Time  `json:"createdAt"`
	DisabledAt    *time.Time `json:"disabledAt"`
}

// CreateWebhookSubscriptionInput subscribes a destination. With an
// IdempotencyKey the call is retried like a query and a repeat returns the
// first subscription.
type CreateWebhookSubscriptionInput struct {
	ProjectID      string   `json:"projectId"`
	DestinationID  string   `json:"destinationId"`
	EventTypes     []string `json:"eventTypes"`
	Description    string   `json:"description,omitempty"`
	IdempotencyKey string   `json:"idempotencyKey,omitempty"`
}

// WebhookDelivery is one event on its way to one subscription's
// destination, with its attempts.
type WebhookDelivery struct {
	ID             string                   `json:"id"`
	ProjectID      string                   `json:"projectId"`
	SubscriptionID string                   `json:"subscriptionId"`
	DestinationID  string                   `json:"destinationId"`
	EventID        string                   `json:"eventId"`
	EventSequence  uint64                   `json:"eventSequence,string"`
	EventType      string                   `json:"eventType"`
	IdempotencyKey string                   `json:"idempotencyKey"`
	State          string                   `json:"state"`
	AttemptCount   int                      `json:"attemptCount"`
	MaxAttempts    int                      `json:"maxAttempts"`
	NextAttemptAt  *time.Time               `json:"nextAttemptAt"`
	CreatedAt      time.Time                `json:"createdAt"`
	UpdatedAt      time.Time                `json:"updatedAt"`
	DeliveredAt    *time.Time               `json:"deliveredAt"`
	DeadLetteredAt *time.Time               `json:"deadLetteredAt"`
	LastError      string                   `json:"lastError"`
	Attempts       []WebhookDeliveryAttempt `json:"attempts"`
}

// WebhookDeliveryAttempt is the evidence of one attempt.
type WebhookDeliveryAttempt struct {
	Number       int        `json:"number"`
	Outcome      string     `json:"outcome"`
	StartedAt    time.Time  `json:"startedAt"`
	FinishedAt   *time.Time `json:"finishedAt"`
	StatusCode   *int       `json:"statusCode"`
	LatencyMs    *float64   `json:"latencyMs"`
	ErrorClass   string     `json:"errorClass"`
	Error        string     `json:"error"`
	ResponseBody string     `json:"responseBody"`
}

// WebhookDeliveryFilter narrows WebhookDeliveries.
type WebhookDeliveryFilter struct {
	SubscriptionID string `json:"subscriptionId,omitempty"`
	// State is PENDING, DELIVERING, DELIVERED, RETRYING or DEAD_LETTERED.
	State   string `json:"state,omitempty"`
	EventID string `json:"eventId,omitempty"`
}

// ListOptions page a list: First is 1-100 (default 50), After the
// EndCursor of the previous page.
type ListOptions struct {
	First int
	After string
}

// vars adds the page variables to v.
func (o ListOptions) vars(v map[string]any) map[string]any {
	if o.First > 0 {
		v["first"] = o.First
	}
	if o.After != "" {
		v["after"] = o.After
	}
	return v
}

// PageInfo says whether a list goes on, and from where.
type PageInfo struct {
	HasNextPage bool
	EndCursor   string
}

// connection is the wire shape of a GraphQL connection.
type connection[T any] struct {
	Edges    []struct{ Node T }
	PageInfo struct {
		HasNextPage bool
		EndCursor   *string
	}
}

// page turns a connection into its nodes and page info.
func (c connection[T]) page() ([]T, PageInfo) {
	nodes := make([]T, len(c.Edges))
	for i, e := range c.Edges {
		nodes[i] = e.Node
	}
	info := PageInfo{HasNextPage: c.PageInfo.HasNextPage}
	if c.PageInfo.EndCursor != nil {
		info.EndCursor = *c.PageInfo.EndCursor
	}
	return nodes, info
}

const (
	destinationFields  = `id projectId url description createdAt secretRotatedAt activeSecrets`
	subscriptionFields = `id projectId destinationId eventTypes description state afterSequence createdAt disabledAt`
	deliveryFields     = `id projectId subscriptionId destinationId eventId eventSequence eventType idempotencyKey state
attemptCount maxAttempts nextAttemptAt createdAt updatedAt deliveredAt deadLetteredAt lastError
attempts { number outcome startedAt finishedAt statusCode latencyMs errorClass error responseBody }`
)

// CreateWebhookDestination registers an HTTPS receiver in a project and
// returns it with its signing secret, shown only now. Needs webhooks:write.
func (c *Client) CreateWebhookDestination(ctx context.Context, in CreateWebhookDestinationInput) (CreatedWebhookDestination, error) {
	var out struct{ CreateWebhookDestination CreatedWebhookDestination }
	err := c.do(ctx, command, `mutation($in: CreateWebhookDestinationInput!) { createWebhookDestination(input: $in) {
destination { `+destinationFields+` } signingSecret } }`, map[string]any{"in": in}, &out)
	return out.CreateWebhookDestination, err
}

// RotateWebhookDestinationSecret gives a destination a new signing secret;
// the replaced ones keep signing for gracePeriod (nil: the server's 24 h
// default). Needs webhooks:write.
func (c *Client) RotateWebhookDestinationSecret(ctx context.Context, destinationID string, gracePeriod *time.Duration) (RotatedWebhookSecret, error) {
	in := map[string]any{"destinationId": destinationID}
	if gracePeriod != nil {
		in["gracePeriodSeconds"] = int(gracePeriod.Seconds())
	}
	var out struct{ RotateWebhookDestinationSecret RotatedWebhookSecret }
	err := c.do(ctx, command, `mutation($in: RotateWebhookDestinationSecretInput!) { rotateWebhookDestinationSecret(input: $in) {
destination { `+destinationFields+` } signingSecret previousSecretsExpireAt } }`, map[string]any{"in": in}, &out)
	return out.RotateWebhookDestinationSecret, err
}

// CreateWebhookSubscription subscribes a destination of the project to the
// events whose action matches EventTypes. Needs webhooks:write.
func (c *Client) CreateWebhookSubscription(ctx context.Context, in CreateWebhookSubscriptionInput) (WebhookSubscription, error) {
	kind := command
	if in.IdempotencyKey != "" {
		kind = idempotentCommand
	}
	var out struct {
		CreateWebhookSubscription struct{ Subscription WebhookSubscription }
	}
	err := c.do(ctx, kind, `mutation($in: CreateWebhookSubscriptionInput!) { createWebhookSubscription(input: $in) {
subscription { `+subscriptionFields+` } } }`, map[string]any{"in": in}, &out)
	return out.CreateWebhookSubscription.Subscription, err
}

// DisableWebhookSubscription disables a subscription for good; disabling
// twice succeeds. Being idempotent, it is retried like a query. Needs
// webhooks:write.
func (c *Client) DisableWebhookSubscription(ctx context.Context, subscriptionID string) (WebhookSubscription, error) {
	var out struct {
		DisableWebhookSubscription struct{ Subscription WebhookSubscription }
	}
	err := c.do(ctx, idempotentCommand, `mutation($in: DisableWebhookSubscriptionInput!) { disableWebhookSubscription(input: $in) {
subscription { `+subscriptionFields+` } } }`, map[string]any{"in": map[string]any{"subscriptionId": subscriptionID}}, &out)
	return out.DisableWebhookSubscription.Subscription, err
}

// RedriveWebhookDelivery sends a dead-lettered delivery again with a fresh
// budget of attempts; confirm must be true. Needs deliveries:redrive.
func (c *Client) RedriveWebhookDelivery(ctx context.Context, deliveryID string, confirm bool) (WebhookDelivery, error) {
	var out struct {
		RedriveWebhookDelivery struct{ Delivery WebhookDelivery }
	}
	err := c.do(ctx, command, `mutation($in: RedriveWebhookDeliveryInput!) { redriveWebhookDelivery(input: $in) {
delivery { `+deliveryFields+` } } }`, map[string]any{"in": map[string]any{"deliveryId": deliveryID, "confirm": confirm}}, &out)
	return out.RedriveWebhookDelivery.Delivery, err
}

// WebhookDestination returns one destination; NOT_FOUND when missing or
// not visible. Needs webhooks:read.
func (c *Client) WebhookDestination(ctx context.Context, id string) (WebhookDestination, error) {
	var out struct{ WebhookDestination *WebhookDestination }
	if err := c.do(ctx, query, `query($id: ID!) { webhookDestination(id: $id) { `+destinationFields+` } }`, map[string]any{"id": id}, &out); err != nil {
		return WebhookDestination{}, err
	}
	if out.WebhookDestination == nil {
		return WebhookDestination{}, &Error{Code: CodeNotFound, Message: "webhook destination not found"}
	}
	return *out.WebhookDestination, nil
}

// WebhookDestinations returns a project's destinations, oldest first.
// Needs webhooks:read.
func (c *Client) WebhookDestinations(ctx context.Context, projectID string) ([]WebhookDestination, error) {
	var out struct{ WebhookDestinations []WebhookDestination }
	err := c.do(ctx, query, `query($p: ID!) { webhookDestinations(projectId: $p) { `+destinationFields+` } }`, map[string]any{"p": projectID}, &out)
	return out.WebhookDestinations, err
}

// WebhookSubscription returns one subscription; NOT_FOUND when missing or
// not visible. Needs webhooks:read.
func (c *Client) WebhookSubscription(ctx context.Context, id string) (WebhookSubscription, error) {
	var out struct{ WebhookSubscription *WebhookSubscription }
	if err := c.do(ctx, query, `query($id: ID!) { webhookSubscription(id: $id) { `+subscriptionFields+` } }`, map[string]any{"id": id}, &out); err != nil {
		return WebhookSubscription{}, err
	}
	if out.WebhookSubscription == nil {
		return WebhookSubscription{}, &Error{Code: CodeNotFound, Message: "webhook subscription not found"}
	}
	return *out.WebhookSubscription, nil
}

// WebhookSubscriptions returns a page of a project's subscriptions, oldest
// first. Needs webhooks:read.
func (c *Client) WebhookSubscriptions(ctx context.Context, projectID string, opts ListOptions) ([]WebhookSubscription, PageInfo, error) {
	var out struct {
		WebhookSubscriptions connection[WebhookSubscription]
	}
	err := c.do(ctx, query, `query($p: ID!, $first: Int, $after: String) { webhookSubscriptions(projectId: $p, first: $first, after: $after) {
edges { node { `+subscriptionFields+` } } pageInfo { hasNextPage endCursor } } }`, opts.vars(map[string]any{"p": projectID}), &out)
	if err != nil {
		return nil, PageInfo{}, err
	}
	nodes, info := out.WebhookSubscriptions.page()
	return nodes, info, nil
}

// WebhookDelivery returns one delivery with its attempts; NOT_FOUND when
// missing or not visible. Needs webhooks:read.
func (c *Client) WebhookDelivery(ctx context.Context, id string) (WebhookDelivery, error) {
	var out struct{ WebhookDelivery *WebhookDelivery }
	if err := c.do(ctx, query, `query($id: ID!) { webhookDelivery(id: $id) { `+deliveryFields+` } }`, map[string]any{"id": id}, &out); err != nil {
		return WebhookDelivery{}, err
	}
	if out.WebhookDelivery == nil {
		return WebhookDelivery{}, &Error{Code: CodeNotFound, Message: "webhook delivery not found"}
	}
	return *out.WebhookDelivery, nil
}

// WebhookDeliveries returns a page of a project's deliveries, newest
// first; filter (may be nil) by subscription, state or event. Needs
// webhooks:read.
func (c *Client) WebhookDeliveries(ctx context.Context, projectID string, filter *WebhookDeliveryFilter, opts ListOptions) ([]WebhookDelivery, PageInfo, error) {
	vars := opts.vars(map[string]any{"p": projectID})
	if filter != nil {
		vars["f"] = filter
	}
	var out struct {
		WebhookDeliveries connection[WebhookDelivery]
	}
	err := c.do(ctx, query, `query($p: ID!, $f: WebhookDeliveryFilter, $first: Int, $after: String) {
webhookDeliveries(projectId: $p, filter: $f, first: $first, after: $after) {
edges { node { `+deliveryFields+` } } pageInfo { hasNextPage endCursor } } }`, vars, &out)
	if err != nil {
		return nil, PageInfo{}, err
	}
	nodes, info := out.WebhookDeliveries.page()
	return nodes, info, nil
}
