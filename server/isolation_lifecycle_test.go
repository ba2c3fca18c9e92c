package server_test

import "github.com/aetheriot/aether-audit/app"

// whLifecycleFields are the fields of a webhook destination's lifecycle,
// limits, headers and health: every query and payload of a destination in
// the tests (and so in the isolation matrix) selects them.
const whLifecycleFields = `state disabledReason disabledAt rateLimitPerSecond maxInFlight headers { name value }
  health { consecutiveFailures lastSuccessAt lastFailureAt failingSince successRateLastHour attemptsLastHour circuit circuitOpenUntil }`

const (
	updateDestinationMutation = `mutation($in: UpdateWebhookDestinationInput!) {
  updateWebhookDestination(input: $in) { destination { ` + whDestinationFields + ` } }
}`
	disableDestinationMutation = `mutation($in: DisableWebhookDestinationInput!) {
  disableWebhookDestination(input: $in) { destination { ` + whDestinationFields + ` } }
}`
	enableDestinationMutation = `mutation($in: EnableWebhookDestinationInput!) {
  enableWebhookDestination(input: $in) { destination { ` + whDestinationFields + ` } }
}`
	deleteDestinationMutation = `mutation($in: DeleteWebhookDestinationInput!) {
  deleteWebhookDestination(input: $in) { destination { ` + whDestinationFields + ` } }
}`
)

// isoLifecycleRows are the matrix rows of the destination lifecycle
// (schema/webhook_lifecycle.graphqls): another tenant's or project's
// destination is not found, exactly like a missing one, and nothing of it
// changes.
func isoLifecycleRows() []isoRow {
	in := func(v map[string]any) map[string]any { return map[string]any{"in": v} }
	return []isoRow{
		{name: "updateWebhookDestination", perm: app.PermissionWebhooksWrite, doc: updateDestinationMutation,
			vars: func(r isoResources) map[string]any {
				return in(map[string]any{"destinationId": r.destinationID, "description": "probe", "rateLimitPerSecond": 1,
					"maxInFlight": 1, "headers": []any{map[string]any{"name": "X-Probe", "value": "1"}},
					"url": "https://probe.example.com/hook"})
			},
			otherTenant: isoNotFound, otherProject: isoNotFound, malformedIDs: true},
		{name: "disableWebhookDestination", perm: app.PermissionWebhooksWrite, doc: disableDestinationMutation,
			vars: func(r isoResources) map[string]any {
				return in(map[string]any{"destinationId": r.destinationID, "reason": "probe"})
			},
			otherTenant: isoNotFound, otherProject: isoNotFound, malformedIDs: true},
		{name: "enableWebhookDestination", perm: app.PermissionWebhooksWrite, doc: enableDestinationMutation,
			vars:        func(r isoResources) map[string]any { return in(map[string]any{"destinationId": r.destinationID}) },
			otherTenant: isoNotFound, otherProject: isoNotFound, malformedIDs: true},
		{name: "deleteWebhookDestination", perm: app.PermissionWebhooksWrite, doc: deleteDestinationMutation,
			vars: func(r isoResources) map[string]any {
				return in(map[string]any{"destinationId": r.destinationID, "confirm": true})
			},
			otherTenant: isoNotFound, otherProject: isoNotFound, malformedIDs: true},
	}
}
