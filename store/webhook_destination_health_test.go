package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store"
)

// TestRecordWebhookDestinationSuccesses checks the one-statement count of
// successes against the domain: it counts exactly when the health is
// steady (domain.WebhookDestinationHealth.Steady), as RecordAttempts would,
// and leaves any other destination as it was.
func TestRecordWebhookDestinationSuccesses(t *testing.T) {
	st, now := parallelStore(t)
	now = now.Add(123456 * time.Microsecond)
	ctx := context.Background()
	hour := now.Truncate(time.Hour)
	earlier := now.Add(-time.Minute)
	steady := func() domain.WebhookDestinationHealth {
		return domain.WebhookDestinationHealth{LastSuccessAt: &earlier, HourStart: &hour, HourSucceeded: 7, HourFailed: 2,
			PrevHourSucceeded: 40, PrevHourFailed: 1}
	}
	policy := domain.DefaultWebhookBreakerPolicy
	// insert stores a destination of t1 with a steady health, changed by
	// change.
	insert := func(t *testing.T, change func(d *domain.WebhookDestination)) domain.WebhookDestination {
		t.Helper()
		dest := domain.WebhookDestination{ID: uuid.Must(uuid.NewV7()), TenantID: "t1", ProjectID: "p1",
			URL: "https://receiver.example/hook", CreatedAt: earlier, CreatedBy: "test", State: domain.WebhookDestinationEnabled,
			Health: steady()}
		change(&dest)
		secret := domain.SealedWebhookSecret{ID: uuid.Must(uuid.NewV7()), Sealed: []byte("sealed"), CreatedAt: earlier}
		require.NoError(t, st.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
			if err := tx.InsertWebhookDestination(ctx, dest, secret); err != nil {
				return err
			}
			return tx.SaveWebhookDestinationState(ctx, dest)
		}))
		return dest
	}
	cases := []struct {
		name   string
		change func(d *domain.WebhookDestination)
	}{
		{"Steady", func(*domain.WebhookDestination) {}},
		{"NoHourYet", func(d *domain.WebhookDestination) { d.Health.HourStart = nil }},
		{"CountsOfAnEarlierHour", func(d *domain.WebhookDestination) { h := hour.Add(-time.Hour); d.Health.HourStart = &h }},
		{"FailingSinceTheLastSuccess", func(d *domain.WebhookDestination) {
			d.Health.ConsecutiveFailures, d.Health.FailingSince = 2, &earlier
		}},
		{"BreakerOpen", func(d *domain.WebhookDestination) {
			until := now.Add(time.Minute)
			d.Health.ConsecutiveFailures, d.Health.FailingSince, d.Health.CircuitOpenUntil, d.Health.CircuitOpens = 10, &earlier, &until, 1
		}},
		{"ProbeOut", func(d *domain.WebhookDestination) { until := now.Add(time.Minute); d.Health.ProbeUntil = &until }},
		{"OpenedBefore", func(d *domain.WebhookDestination) { d.Health.CircuitOpens = 1 }},
		{"Deleted", func(d *domain.WebhookDestination) { d.DeletedAt = &earlier }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dest := insert(t, c.change)
			before, err := st.GetWebhookDestination(ctx, "t1", dest.ID, false)
			require.NoError(t, err)

			var counted bool
			require.NoError(t, st.InTx(ctx, func(ctx context.Context, tx *store.Tx) (err error) {
				counted, err = tx.RecordWebhookDestinationSuccesses(ctx, "t1", dest.ID, 5, now)
				return err
			}))
			after, err := st.GetWebhookDestination(ctx, "t1", dest.ID, false)
			require.NoError(t, err)
			steadyNow := dest.DeletedAt == nil && dest.Health.Steady(now)
			require.Equal(t, steadyNow, counted)
			if !counted {
				require.Equal(t, before, after, "left as it was")
				return
			}
			want := before
			require.Equal(t, domain.WebhookHealthChange{}, want.RecordAttempts(domain.WebhookAttemptTally{Succeeded: 5}, now, policy))
			require.Equal(t, want, after, "as RecordAttempts")
			require.Equal(t, 12, after.Health.HourSucceeded)
			require.Equal(t, now, *after.Health.LastSuccessAt)
		})
	}

	t.Run("OtherTenant", func(t *testing.T) {
		t.Parallel()
		dest := insert(t, func(*domain.WebhookDestination) {})
		require.NoError(t, st.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
			counted, err := tx.RecordWebhookDestinationSuccesses(ctx, "t2", dest.ID, 5, now)
			require.False(t, counted)
			return err
		}))
	})
}
