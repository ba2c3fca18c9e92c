package app

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/jobargs"
)

// TestWebhookDeliveryArgsRoundTrip checks that the ids of a batch job
// survive River's JSON encoding in order, that jobs enqueued in the old
// shape (JSON arrays of ids) still decode, and that malformed arguments are
// errors.
func TestWebhookDeliveryArgsRoundTrip(t *testing.T) {
	dest := uuid.Must(uuid.NewV7())
	var ds []*domain.WebhookDelivery
	for range maxDeliveryBatch + 3 {
		ds = append(ds, &domain.WebhookDelivery{ID: uuid.Must(uuid.NewV7()), TenantID: "t1", DestinationID: dest,
			EventID: uuid.Must(uuid.NewV7())})
	}
	jobs := webhookFirstAttemptJobs(ds)
	require.Len(t, jobs, 2)
	var got []*domain.WebhookDelivery
	for _, job := range jobs {
		raw, err := json.Marshal(job.Args)
		require.NoError(t, err)
		require.NotContains(t, string(raw), "delivery_ids", "no JSON array of ids for River's GIN index")
		var args jobargs.WebhookDeliveryArgs
		require.NoError(t, json.Unmarshal(raw, &args))
		require.Equal(t, dest, args.DestinationID)
		deliveries, events, err := args.IDs()
		require.NoError(t, err)
		require.Len(t, deliveries, args.Len())
		for i := range deliveries {
			got = append(got, &domain.WebhookDelivery{ID: deliveries[i], EventID: events[i]})
			require.Equal(t, 1, args.Attempt(i))
		}
	}
	require.Len(t, got, len(ds))
	for i := range ds {
		require.Equal(t, ds[i].ID, got[i].ID)
		require.Equal(t, ds[i].EventID, got[i].EventID)
	}

	retry := webhookDeliveryJob(&domain.WebhookDelivery{ID: ds[0].ID, EventID: ds[0].EventID, AttemptCount: 2}, ds[0].CreatedAt).Args.(jobargs.WebhookDeliveryArgs)
	deliveries, events, err := retry.IDs()
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{ds[0].ID}, deliveries)
	require.Equal(t, []uuid.UUID{ds[0].EventID}, events)
	require.Equal(t, 3, retry.Attempt(0))

	var legacy jobargs.WebhookDeliveryArgs
	require.NoError(t, json.Unmarshal([]byte(`{"tenant_id":"t1","destination_id":"`+dest.String()+
		`","delivery_ids":["`+ds[1].ID.String()+`"],"event_ids":["`+ds[1].EventID.String()+`"],"attempts":[4]}`), &legacy))
	require.Equal(t, 1, legacy.Len())
	deliveries, events, err = legacy.IDs()
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{ds[1].ID}, deliveries)
	require.Equal(t, []uuid.UUID{ds[1].EventID}, events)
	require.Equal(t, 4, legacy.Attempt(0))

	for _, bad := range []jobargs.WebhookDeliveryArgs{
		{Deliveries: strings.Repeat("a", 63)},
		{Deliveries: strings.Repeat("z", 64)},
		{LegacyDeliveryIDs: []uuid.UUID{ds[0].ID}},
	} {
		_, _, err := bad.IDs()
		require.Error(t, err)
	}
}

// TestDeliveryJobTimeout checks that a delivery job's timeout counts its
// requests in rounds of the destination's in-flight limit, plus time for
// the outcomes.
func TestDeliveryJobTimeout(t *testing.T) {
	a := New[Tx](nil, Config{Webhooks: WebhookConfig{MaxInFlightPerDestination: 8}})
	require.Equal(t, 45*time.Second, a.DeliveryJobTimeout(1, 15*time.Second))
	require.Equal(t, 45*time.Second, a.DeliveryJobTimeout(8, 15*time.Second))
	require.Equal(t, 60*time.Second, a.DeliveryJobTimeout(9, 15*time.Second))
	require.Equal(t, 13*15*time.Second+30*time.Second, a.DeliveryJobTimeout(maxDeliveryBatch, 15*time.Second))
	one := New[Tx](nil, Config{Webhooks: WebhookConfig{MaxInFlightPerDestination: 1}})
	require.Equal(t, maxDeliveryBatch*time.Second+30*time.Second, one.DeliveryJobTimeout(maxDeliveryBatch, time.Second))
}
