package server_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// exportFilterFields selects every field of DataExport.filter.
const exportFilterFields = `filter { action subjectId resourceType resourceId outcome occurredFrom occurredTo
  sequenceFrom sequenceTo recordedBySubject correlation { traceId requestId causationId } }`

// TestExportFilterOverGraphQL: requestDataExport takes an AuditEventFilter,
// DataExport.filter gives it back in the input's shape (null when
// unfiltered), the export holds only the matching events and has no
// checkpoint, and a bad filter is BAD_USER_INPUT naming its field.
func TestExportFilterOverGraphQL(t *testing.T) {
	b := setupExports(t, nil)
	tok := b.token(t, tokenOpts{perms: allExportPerms})
	events := make([]map[string]any, 4)
	for i := range events {
		events[i] = eventInput(projectA, "device.firmware.updated")
	}
	events[1]["correlation"] = map[string]any{"requestId": "r-1"}
	events[3]["correlation"] = map[string]any{"requestId": "r-1"}
	b.record(t, tok, events...)

	filter := map[string]any{
		"action": "device.*", "subjectId": "user-1", "resourceType": "device", "resourceId": "dev-1",
		"outcome": []string{"SUCCESS"}, "occurredFrom": "2026-01-02T00:00:00Z", "occurredTo": "2026-01-03T00:00:00Z",
		"sequenceFrom": "1", "sequenceTo": "100", "recordedBySubject": "tester",
		"correlation": map[string]any{"requestId": "r-1"},
	}
	query := `mutation($in: RequestDataExportInput!) { requestDataExport(input: $in) { export { id checkpoint { sequence } ` +
		exportFilterFields + ` } } }`
	res := b.graphql(t, tok, query, map[string]any{"in": exportInput(map[string]any{"filter": filter})})
	var req struct {
		RequestDataExport struct {
			Export struct {
				ID     string
				Filter json.RawMessage
			}
		}
	}
	res.decode(t, &req)
	e := req.RequestDataExport.Export
	want := `{"action":"device.*","subjectId":"user-1","resourceType":"device","resourceId":"dev-1","outcome":["SUCCESS"],
		"occurredFrom":"2026-01-02T00:00:00Z","occurredTo":"2026-01-03T00:00:00Z","sequenceFrom":"1","sequenceTo":"100",
		"recordedBySubject":"tester","correlation":{"traceId":null,"requestId":"r-1","causationId":null}}`
	require.JSONEq(t, want, string(e.Filter), "the filter as given")

	b.runExport(t, tenantA, e.ID)
	res = b.graphql(t, tok, `query($id: ID!) { dataExport(id: $id) { state rowCount checkpoint { sequence } `+exportFilterFields+` } }`,
		map[string]any{"id": e.ID})
	var got struct {
		DataExport struct {
			State, RowCount string
			Checkpoint      *struct{ Sequence string }
			Filter          json.RawMessage
		}
	}
	res.decode(t, &got)
	require.Equal(t, "READY", got.DataExport.State)
	require.Equal(t, "2", got.DataExport.RowCount, "the two events with request id r-1")
	require.Nil(t, got.DataExport.Checkpoint, "a filtered export has no checkpoint")
	require.JSONEq(t, want, string(got.DataExport.Filter), "stored and read back the same")

	// Only what was given, the rest null; an unfiltered export has none.
	res = b.graphql(t, tok, query, map[string]any{"in": exportInput(map[string]any{"filter": map[string]any{"recordedBySubject": "tester"}})})
	res.decode(t, &req)
	require.JSONEq(t, `{"action":null,"subjectId":null,"resourceType":null,"resourceId":null,"outcome":null,
		"occurredFrom":null,"occurredTo":null,"sequenceFrom":null,"sequenceTo":null,"recordedBySubject":"tester","correlation":null}`,
		string(req.RequestDataExport.Export.Filter))
	res = b.graphql(t, tok, query, map[string]any{"in": exportInput(nil)})
	res.decode(t, &req)
	require.JSONEq(t, `null`, string(req.RequestDataExport.Export.Filter))

	for name, tc := range map[string]struct {
		in    map[string]any
		field string
	}{
		"not AUDIT":  {map[string]any{"kind": "ALARM", "filter": map[string]any{"subjectId": "user-1"}}, "filter"},
		"bad action": {map[string]any{"filter": map[string]any{"action": "Device"}}, "filter.action"},
		"NUL": {map[string]any{"filter": map[string]any{"correlation": map[string]any{"causationId": "c\x00"}}},
			"filter.correlation.causationId"},
	} {
		res := b.graphql(t, tok, query, map[string]any{"in": exportInput(tc.in)})
		require.Equal(t, "BAD_USER_INPUT", res.code(t), name)
		require.Equal(t, tc.field, res.Errors[0].Extensions["field"], "%s: %s", name, res.Raw)
	}
}
