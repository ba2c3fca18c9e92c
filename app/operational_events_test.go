package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

func TestOperationalEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	system := domain.Subject{Type: domain.SubjectSystem, ID: "system:aether"}

	t.Run("DeadLettersAreRecordedAndNeverLoop", func(t *testing.T) {
		t.Parallel()
		// Two dead receivers, each subscribed to the service's webhook
		// events: neither gets its own, and a dead letter of a dead
		// letter records nothing.
		b := setupWebhooks(t, webhookOpts{schedule: domain.RetrySchedule{time.Second},
			breaker: domain.WebhookBreakerPolicy{Failures: 100}})
		b.receiver.setRespond(status(http.StatusInternalServerError))
		dead := b.createDestination(t, "/dead").Destination
		other := b.createDestination(t, "/other").Destination
		b.subscribe(t, other.ID.String(), "webhook.delivery.*", "webhook.destination.*")
		b.subscribe(t, dead.ID.String(), "device.*", "webhook.*")
		drain := func() {
			for range 10 {
				b.fanOut(t)
				jobs := b.deliveryJobs(t)
				if len(jobs) == 0 {
					return
				}
				b.clock.Add(2 * time.Second)
				for _, j := range jobs {
					require.NoError(t, b.app.DeliverWebhooks(ctx, j.Args))
				}
			}
			t.Fatal("deliveries did not settle")
		}
		e := b.record(t, "device.rebooted")
		drain()

		letters := auditEvents(t, b.app, b.admin, "p1", "webhook.delivery.dead_lettered")
		require.Len(t, letters, 1, "the device event's dead letter, and none for the dead letter's own delivery")
		dl := letters[0]
		require.Equal(t, system, dl.Subject)
		require.Equal(t, "SYSTEM", string(dl.Subject.Type))
		first := b.deliveries(t, app.WebhookDeliveriesInput{EventID: e.ID.String()})
		require.Len(t, first, 1)
		require.Equal(t, domain.Resource{Type: "webhook_delivery", ID: first[0].ID.String()}, dl.Resource)
		var details struct {
			DestinationID string `json:"destinationId"`
			EventID       string `json:"eventId"`
			Attempts      int    `json:"attempts"`
		}
		require.NoError(t, json.Unmarshal(dl.Details, &details))
		require.Equal(t, dead.ID.String(), details.DestinationID)
		require.Equal(t, e.ID.String(), details.EventID)
		require.Equal(t, 2, details.Attempts)

		ds := b.deliveries(t, app.WebhookDeliveriesInput{EventID: dl.ID.String()})
		require.Len(t, ds, 1, "the dead letter goes to the other destination only")
		require.Equal(t, other.ID, ds[0].DestinationID)
		require.Equal(t, domain.WebhookDeliveryDeadLettered, ds[0].State, "and dies there too, recording nothing more")
	})

	t.Run("ExportReadyAndFailed", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{})
		e := b.ready(t, nil)
		ready := auditEvents(t, b.app, b.user, "p1", "export.ready")
		require.Len(t, ready, 1)
		require.Equal(t, system, ready[0].Subject)
		require.Equal(t, domain.Resource{Type: "data_export", ID: e.ID.String()}, ready[0].Resource)
		require.Contains(t, string(ready[0].Details), e.ContentDigest)

		small := setupExports(t, app.ExportConfig{MaxBytes: 100})
		for range 3 {
			_, err := small.app.RecordAuditEvent(ctx, small.svc, draft("p1", "device.rebooted"), "")
			require.NoError(t, err)
		}
		f := small.request(t, nil)
		require.NoError(t, runExport(ctx, small.app, f, 1, nil))
		failed := auditEvents(t, small.app, small.user, "p1", "export.failed")
		require.Len(t, failed, 1)
		require.Equal(t, system, failed[0].Subject)
		require.Contains(t, string(failed[0].Details), "would exceed 100 bytes")
	})
}
