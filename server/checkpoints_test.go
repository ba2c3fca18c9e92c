package server_test

import (
	"encoding/json"
	"net/http"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
)

// TestCheckpointsOverGraphQL requests an AUDIT export by sequence range in
// GraphQL, runs it, and checks its checkpoint against auditCheckpoints and
// the public JWKS with go-jose; createAuditCheckpoint answers the existing
// checkpoint at an unchanged head.
func TestCheckpointsOverGraphQL(t *testing.T) {
	b := setupExports(t, nil)
	tok := b.token(t, tokenOpts{perms: allExportPerms})
	b.recordN(t, tok, 3, "device.firmware.updated")

	res := b.graphql(t, tok, `mutation($in: RequestDataExportInput!) {
  requestDataExport(input: $in) { export { id from to fromSequence toSequence checkpoint { sequence } } } }`,
		map[string]any{"in": exportInput(map[string]any{"from": nil, "to": nil, "fromSequence": "2", "toSequence": "3"})})
	var req struct {
		RequestDataExport struct {
			Export struct {
				ID                       string
				From, To                 *string
				FromSequence, ToSequence string
				Checkpoint               *struct{ Sequence string }
			}
		}
	}
	res.decode(t, &req)
	e := req.RequestDataExport.Export
	require.Nil(t, e.From)
	require.Nil(t, e.To)
	require.Equal(t, []string{"2", "3"}, []string{e.FromSequence, e.ToSequence})
	require.Nil(t, e.Checkpoint, "none until READY")
	b.runExport(t, tenantA, e.ID)

	res = b.graphql(t, tok, `query($id: ID!) { dataExport(id: $id) { state rowCount checkpoint { sequence jws } } }`, map[string]any{"id": e.ID})
	var got struct {
		DataExport struct {
			State, RowCount string
			Checkpoint      struct{ Sequence, JWS string }
		}
	}
	res.decode(t, &got)
	require.Equal(t, "READY", got.DataExport.State)
	require.Equal(t, "2", got.DataExport.RowCount)
	cp := got.DataExport.Checkpoint
	require.Equal(t, "3", cp.Sequence)

	res = b.graphql(t, tok, `query($p: ID!) { auditCheckpoints(projectId: $p) {
  edges { cursor node { sequence chainHash keyId jws previousCheckpoint issuedAt purgedThroughSequence anchorHash } } pageInfo { hasNextPage endCursor } } }`,
		map[string]any{"p": projectA})
	var list struct {
		AuditCheckpoints struct {
			Edges []struct {
				Node struct {
					Sequence, ChainHash, KeyID, JWS string
					PreviousCheckpoint              *string
				}
			}
		}
	}
	res.decode(t, &list)
	require.Len(t, list.AuditCheckpoints.Edges, 1)
	node := list.AuditCheckpoints.Edges[0].Node
	require.Equal(t, cp.JWS, node.JWS)
	require.Nil(t, node.PreviousCheckpoint)

	// Any JOSE library verifies it with the published keys.
	resp, body := fetch(t, b.url+"/.well-known/aether/checkpoint-keys")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/jwk-set+json", resp.Header.Get("Content-Type"))
	var set jose.JSONWebKeySet
	require.NoError(t, json.Unmarshal(body, &set))
	obj, err := jose.ParseSignedCompact(cp.JWS, []jose.SignatureAlgorithm{jose.EdDSA})
	require.NoError(t, err)
	require.Equal(t, node.KeyID, obj.Signatures[0].Header.KeyID)
	keys := set.Key(node.KeyID)
	require.Len(t, keys, 1)
	payload, err := obj.Verify(keys[0])
	require.NoError(t, err)
	require.Contains(t, string(payload), `"sequence":"3","chainHash":"`+node.ChainHash+`"`)

	// The export's own events, export.requested and export.ready, moved
	// the head to 5: a checkpoint now is at 5, linked to the one at 3;
	// again, the same one.
	admin := b.token(t, tokenOpts{perms: []app.Permission{app.PermissionAdmin}})
	var created [2]string
	for i := range created {
		res = b.graphql(t, admin, `mutation($in: CreateAuditCheckpointInput!) { createAuditCheckpoint(input: $in) { checkpoint { sequence jws previousCheckpoint } } }`,
			map[string]any{"in": map[string]any{"projectId": projectA}})
		var c struct {
			CreateAuditCheckpoint struct {
				Checkpoint struct {
					Sequence, JWS      string
					PreviousCheckpoint *string
				}
			}
		}
		res.decode(t, &c)
		require.Equal(t, "5", c.CreateAuditCheckpoint.Checkpoint.Sequence)
		require.NotNil(t, c.CreateAuditCheckpoint.Checkpoint.PreviousCheckpoint)
		created[i] = c.CreateAuditCheckpoint.Checkpoint.JWS
	}
	require.Equal(t, created[0], created[1])

	// verifyAuditChain counts both.
	res = b.graphql(t, tok, `query($p: ID!) { verifyAuditChain(projectId: $p) { valid checkpointsChecked firstInvalidCheckpointSequence } }`,
		map[string]any{"p": projectA})
	require.JSONEq(t, `{"verifyAuditChain":{"valid":true,"checkpointsChecked":"2","firstInvalidCheckpointSequence":null}}`, string(res.Data))
}
