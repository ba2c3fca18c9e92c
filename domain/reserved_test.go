package domain

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestServiceActionsAreReservedAndValid(t *testing.T) {
	for _, a := range ServiceActions {
		require.NoError(t, ValidateAction("action", a), a)
		require.True(t, IsReservedAction(a), "%s is not in a reserved namespace", a)
	}
}

func TestCheckClientWritable(t *testing.T) {
	d := validDraft()
	require.NoError(t, d.CheckClientWritable("events[0]"))
	for _, tc := range []struct {
		edit  func(*AuditEventDraft)
		field string
	}{
		{func(d *AuditEventDraft) { d.Action = "audit.events.purged" }, "events[0].action"},
		{func(d *AuditEventDraft) { d.Action = "webhook.anything.new" }, "events[0].action"},
		{func(d *AuditEventDraft) { d.Action = "export.requested" }, "events[0].action"},
		{func(d *AuditEventDraft) { d.Action = "retention.changed" }, "events[0].action"},
		{func(d *AuditEventDraft) { d.Subject = Subject{Type: SubjectSystem, ID: "system:retention"} }, "events[0].subject.id"},
		{func(d *AuditEventDraft) { d.Subject = Subject{Type: SubjectUser, ID: "system:x"} }, "events[0].subject.id"},
	} {
		d := validDraft()
		tc.edit(&d)
		err := d.CheckClientWritable("events[0]")
		var v *ValidationError
		require.True(t, errors.As(err, &v), "%v", err)
		require.Equal(t, tc.field, v.Field)
	}
	// Near misses stay the clients'.
	for _, a := range []string{"audits.read", "device.audit.done", "webhooks.sent", "exported.file"} {
		d := validDraft()
		d.Action = a
		require.NoError(t, d.CheckClientWritable(""), a)
	}
	d.Subject = Subject{Type: SubjectSystem, ID: "cron-7"}
	require.NoError(t, d.CheckClientWritable(""))
}
