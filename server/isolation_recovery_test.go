package server_test

import "github.com/aetheriot/aether-audit/app"

// The isolation rows of recovery, replay, test events and skips (issue 18):
// each names the owner's destination, subscription or delivery, and must
// answer tenant B and a token without the project exactly as a missing one.
const (
	isoRecoverMutation   = `mutation($in: RecoverWebhookDeliveriesInput!) { recoverWebhookDeliveries(input: $in) { count } }`
	isoReplayMutation    = `mutation($in: ReplayWebhookEventsInput!) { replayWebhookEvents(input: $in) { count replayOf } }`
	isoTestEventMutation = `mutation($in: SendWebhookTestEventInput!) {
  sendWebhookTestEvent(input: $in) { webhookId attempt { number outcome statusCode } }
}`
	isoSkipMutation = `mutation($in: SkipWebhookDeliveryInput!) { skipWebhookDelivery(input: $in) { delivery { ` + whDeliveryFields + ` } } }`
)

// isoRecoveryRows are the rows of the recovery operations; in wraps the
// input variable.
func isoRecoveryRows(in func(map[string]any) map[string]any) []isoRow {
	return []isoRow{
		{name: "recoverWebhookDeliveries", perm: app.PermissionDeliveriesRedrive, doc: isoRecoverMutation,
			vars: func(r isoResources) map[string]any {
				return in(map[string]any{"destinationId": r.destinationID, "since": "2000-01-01T00:00:00Z", "confirm": true})
			},
			otherTenant: isoNotFound, otherProject: isoNotFound, malformedIDs: true},
		{name: "replayWebhookEvents", perm: app.PermissionDeliveriesRedrive, doc: isoReplayMutation,
			vars: func(r isoResources) map[string]any {
				return in(map[string]any{"subscriptionId": r.subscriptionID, "fromSequence": "1", "toSequence": "100", "confirm": true})
			},
			otherTenant: isoNotFound, otherProject: isoNotFound, malformedIDs: true},
		{name: "sendWebhookTestEvent", perm: app.PermissionWebhooksWrite, doc: isoTestEventMutation,
			vars:        func(r isoResources) map[string]any { return in(map[string]any{"destinationId": r.destinationID}) },
			otherTenant: isoNotFound, otherProject: isoNotFound, malformedIDs: true},
		{name: "skipWebhookDelivery", perm: app.PermissionDeliveriesRedrive, doc: isoSkipMutation,
			vars: func(r isoResources) map[string]any {
				return in(map[string]any{"deliveryId": r.deliveryID, "confirm": true})
			},
			otherTenant: isoNotFound, otherProject: isoNotFound, malformedIDs: true},
	}
}
