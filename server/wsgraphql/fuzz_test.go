package wsgraphql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql/handler/testserver"
	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
)

// FuzzClientMessage feeds arbitrary bytes to the decoding steps every
// client message of either protocol goes through (the envelope, an object
// payload, a subscribe/start payload) and checks what the handlers build
// from what they decoded: nothing panics, an accepted payload re-encodes
// to JSON that decodes to the same value, a frame carrying the message's id
// is valid JSON with that id, and a close reason naming the message's type
// fits a close frame as valid UTF-8. The seed corpus is in
// testdata/fuzz/FuzzClientMessage.
func FuzzClientMessage(f *testing.F) {
	f.Add([]byte(`{"id":"1","type":"subscribe","payload":{"query":"subscription { name }","variables":{"n":1}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m envelope
		if err := json.Unmarshal(data, &m); err != nil {
			return // closed with 4400 "Invalid message received"
		}
		if m.Type != nil {
			reason := truncateReason(fmt.Sprintf("Invalid message received: unexpected type %q", *m.Type))
			require.LessOrEqual(t, len(reason), 123)
			require.True(t, utf8.ValidString(reason), "reason %q", reason)
		}
		if m.ID != nil {
			fr := frame(*m.ID, tNext, []byte(`{"data":{}}`))
			var back struct {
				ID   string `json:"id"`
				Type string `json:"type"`
			}
			require.NoError(t, json.Unmarshal(fr, &back), "frame %s", fr)
			if *m.ID != "" {
				require.Equal(t, *m.ID, back.ID)
			}
			require.Equal(t, tNext, back.Type)
		}

		obj, ok := decodeObject(m.Payload)
		if ok {
			require.True(t, isObjectOrAbsent(m.Payload))
			if obj != nil {
				requireRoundTrip(t, obj)
			}
		} else {
			require.False(t, isAbsent(m.Payload), "an absent payload is refused")
		}

		for _, strict := range []bool{true, false} {
			params, ok := decodeSubscribe(m.Payload, strict)
			if !ok {
				continue
			}
			require.False(t, isAbsent(m.Payload), "a subscribe without payload is accepted")
			require.Equal(t, byte('{'), bytes.TrimSpace(m.Payload)[0])
			if strict {
				var q struct {
					Query *string `json:"query"`
				}
				require.NoError(t, json.Unmarshal(m.Payload, &q))
				require.NotNil(t, q.Query, "strict subscribe without query accepted: %s", m.Payload)
			}
			if params.Variables != nil {
				requireRoundTrip(t, params.Variables)
			}
			if params.Extensions != nil {
				requireRoundTrip(t, params.Extensions)
			}
		}
	})
}

// requireRoundTrip checks that v (decoded with UseNumber) encodes to JSON
// that decodes back to v.
func requireRoundTrip(t *testing.T, v map[string]any) {
	t.Helper()
	enc, err := json.Marshal(v)
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(enc))
	dec.UseNumber()
	var back map[string]any
	require.NoError(t, dec.Decode(&back), "%s", enc)
	require.Equal(t, v, back)
}

// fuzzCloseCodes are the close codes an arbitrary client message may get
// from a server without failures: anything else (4500, an abnormal close)
// means the message broke the connection.
var fuzzCloseCodes = map[int]bool{
	CloseNormalClosure: true, CloseMessageTooBig: true, CloseTryAgainLater: true,
	CloseBadRequest: true, CloseUnauthorized: true, CloseForbidden: true,
	CloseSubscriberAlreadyExists: true, CloseTooManyInitialisationRequests: true,
}

// fuzzServerMessageTypes are the message types a server sends.
var fuzzServerMessageTypes = map[bool]map[string]bool{
	false: {tConnectionAck: true, tPing: true, tPong: true, tNext: true, tError: true, tComplete: true},
	true:  {tConnectionAck: true, "ka": true, tLegacyData: true, tError: true, tComplete: true, tLegacyConnectionError: true},
}

// FuzzConnection sends one arbitrary message on a live connection of
// either protocol (after connection_init when init is set), then a probe:
// in graphql-transport-ws a ping, which must be answered by a pong; in the
// legacy protocol connection_terminate, which closes with 1000. Until then
// the server must send only well-formed messages of its protocol and may
// close only with a documented code for a client mistake (4500 or an
// abnormal close means the message broke the server). The connection_init
// payload is accepted unless it carries an Authorization other than
// "Bearer ok" (then 4403). Each input opens a socket, so the seed corpus
// (testdata/fuzz/FuzzConnection) stays small.
func FuzzConnection(f *testing.F) {
	srv := testserver.New()
	tr := New(Config{
		ReadLimit: 4 << 10,
		Authenticate: func(ctx context.Context, _ *http.Request, payload map[string]any) (context.Context, time.Time, error) {
			if v, present := payload["Authorization"]; present && v != "Bearer ok" {
				return nil, time.Time{}, errors.New("bad token")
			}
			return ctx, time.Time{}, nil
		},
	})
	srv.AddTransport(tr)
	ts := httptest.NewServer(srv)
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		require.NoError(f, tr.Shutdown(ctx))
		ts.Close()
	})
	url := "ws" + strings.TrimPrefix(ts.URL, "http")

	f.Add(false, true, []byte(`{"id":"1","type":"subscribe","payload":{"query":"query { name }"}}`))
	f.Fuzz(func(t *testing.T, legacy, init bool, message []byte) {
		proto := SubprotocolGraphQLTransportWS
		if legacy {
			proto = SubprotocolGraphQLWS
		}
		c := dial(t, url, proto)
		if init {
			c.send(msg{Type: tConnectionInit})
			c.expect(tConnectionAck, "")
			if legacy {
				c.expect("ka", "")
			}
		}
		c.sendRaw(string(message))
		probe := `{"type":"ping","payload":{"probe":"fuzz"}}`
		if legacy {
			probe = `{"type":"connection_terminate"}`
		}
		// The socket may already be closing; a failed write shows in the read.
		_ = c.ws.WriteMessage(websocket.TextMessage, []byte(probe))

		require.NoError(t, c.ws.SetReadDeadline(time.Now().Add(waitFor)))
		for {
			_, data, err := c.ws.ReadMessage()
			if err != nil {
				var ce *websocket.CloseError
				require.True(t, errors.As(err, &ce), "want a close frame, got %v", err)
				require.True(t, fuzzCloseCodes[ce.Code], "closed with %d %q", ce.Code, ce.Text)
				if ce.Code == CloseNormalClosure {
					require.True(t, legacy, "graphql-transport-ws closed normally")
				}
				return
			}
			var m msg
			require.NoError(t, json.Unmarshal(data, &m), "server message %q", data)
			require.True(t, fuzzServerMessageTypes[legacy][m.Type], "server message %s", data)
			if !legacy && m.Type == tPong && string(m.Payload) == `{"probe":"fuzz"}` {
				return // answered; Cleanup drops the socket
			}
		}
	})
}
