package client

import (
	"context"
	"strconv"
	"time"
)

// DataExport is a bounded export of a project's history (never its bytes:
// fetch them through [Client.CreateDataExportDownload]).
type DataExport struct {
	ID        string `json:"id"`
	ProjectID string `json:"projectId"`
	// Kind is AUDIT, ALARM or TELEMETRY; Format NDJSON or CSV;
	// Compression NONE or GZIP.
	Kind        string     `json:"kind"`
	Format      string     `json:"format"`
	Compression string     `json:"compression"`
	From        *time.Time `json:"from"`
	To          *time.Time `json:"to"`
	// State is QUEUED, RUNNING, READY, FAILED or EXPIRED.
	State         string     `json:"state"`
	RequestedAt   time.Time  `json:"requestedAt"`
	StartedAt     *time.Time `json:"startedAt"`
	ProgressRows  uint64     `json:"progressRows,string"`
	ProgressBytes uint64     `json:"progressBytes,string"`
	ObjectRef     *string    `json:"objectRef"`
	// ContentDigest is sha256:<hex> of the stored object once READY.
	ContentDigest *string    `json:"contentDigest"`
	ByteLength    *uint64    `json:"byteLength,string"`
	RowCount      *uint64    `json:"rowCount,string"`
	ReadyAt       *time.Time `json:"readyAt"`
	ExpiresAt     *time.Time `json:"expiresAt"`
	FailedAt      *time.Time `json:"failedAt"`
	FailureReason *string    `json:"failureReason"`
	ExpiredAt     *time.Time `json:"expiredAt"`
}

// RequestDataExportInput queues an export: a time range [From, To), or,
// for AUDIT, the events FromSequence..ToSequence; Filter narrows an AUDIT
// export. Confirm must be true. With an IdempotencyKey the call is retried
// like a query and a repeat returns the first export.
type RequestDataExportInput struct {
	ProjectID      string     `json:"projectId"`
	Kind           string     `json:"kind"`
	From           *time.Time `json:"from,omitempty"`
	To             *time.Time `json:"to,omitempty"`
	FromSequence   uint64     `json:"-"`
	ToSequence     uint64     `json:"-"`
	Filter         *Filter    `json:"filter,omitempty"`
	Format         string     `json:"format"`
	Compression    string     `json:"compression"`
	Confirm        bool       `json:"confirm"`
	IdempotencyKey string     `json:"idempotencyKey,omitempty"`
}

// DataExportDownload is a link that downloads a READY export without a
// token until ExpiresAt.
type DataExportDownload struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// DataExportFilter narrows DataExports by state and kind.
type DataExportFilter struct {
	State string `json:"state,omitempty"`
	Kind  string `json:"kind,omitempty"`
}

const exportFields = `id projectId kind format compression from to state requestedAt startedAt progressRows progressBytes
objectRef contentDigest byteLength rowCount readyAt expiresAt failedAt failureReason expiredAt`

// RequestDataExport queues an export and returns it, QUEUED. Needs
// exports:write.
func (c *Client) RequestDataExport(ctx context.Context, in RequestDataExportInput) (DataExport, error) {
	type wire RequestDataExportInput
	v := map[string]any{"in": struct {
		wire
		FromSequence string `json:"fromSequence,omitempty"`
		ToSequence   string `json:"toSequence,omitempty"`
	}{wire: wire(in), FromSequence: optionalSequence(in.FromSequence), ToSequence: optionalSequence(in.ToSequence)}}
	kind := command
	if in.IdempotencyKey != "" {
		kind = idempotentCommand
	}
	var out struct {
		RequestDataExport struct{ Export DataExport }
	}
	err := c.do(ctx, kind, `mutation($in: RequestDataExportInput!) { requestDataExport(input: $in) { export { `+exportFields+` } } }`, v, &out)
	return out.RequestDataExport.Export, err
}

// ExpireDataExport expires a QUEUED, READY or FAILED export now and
// deletes its file; confirm must be true. Needs exports:write.
func (c *Client) ExpireDataExport(ctx context.Context, exportID string, confirm bool) (DataExport, error) {
	var out struct {
		ExpireDataExport struct{ Export DataExport }
	}
	err := c.do(ctx, command, `mutation($in: ExpireDataExportInput!) { expireDataExport(input: $in) { export { `+exportFields+` } } }`,
		map[string]any{"in": map[string]any{"exportId": exportID, "confirm": confirm}}, &out)
	return out.ExpireDataExport.Export, err
}

// CreateDataExportDownload mints a download link of a READY export, valid
// for ttl (0: the server's default, 10 minutes; at most an hour). Needs
// exports:download.
func (c *Client) CreateDataExportDownload(ctx context.Context, exportID string, ttl time.Duration) (DataExportDownload, error) {
	in := map[string]any{"exportId": exportID}
	if ttl > 0 {
		in["ttlSeconds"] = int(ttl.Seconds())
	}
	var out struct{ CreateDataExportDownload DataExportDownload }
	err := c.do(ctx, command, `mutation($in: CreateDataExportDownloadInput!) { createDataExportDownload(input: $in) { url expiresAt } }`,
		map[string]any{"in": in}, &out)
	return out.CreateDataExportDownload, err
}

// DataExport returns one export; NOT_FOUND when missing or not visible.
// Needs exports:read.
func (c *Client) DataExport(ctx context.Context, id string) (DataExport, error) {
	var out struct{ DataExport *DataExport }
	if err := c.do(ctx, query, `query($id: ID!) { dataExport(id: $id) { `+exportFields+` } }`, map[string]any{"id": id}, &out); err != nil {
		return DataExport{}, err
	}
	if out.DataExport == nil {
		return DataExport{}, &Error{Code: CodeNotFound, Message: "data export not found"}
	}
	return *out.DataExport, nil
}

// DataExports returns a page of a project's exports, newest first. Needs
// exports:read.
func (c *Client) DataExports(ctx context.Context, projectID string, filter *DataExportFilter, opts ListOptions) ([]DataExport, PageInfo, error) {
	vars := opts.vars(map[string]any{"p": projectID})
	if filter != nil {
		vars["f"] = filter
	}
	var out struct{ DataExports connection[DataExport] }
	err := c.do(ctx, query, `query($p: ID!, $f: DataExportFilter, $first: Int, $after: String) {
dataExports(projectId: $p, filter: $f, first: $first, after: $after) {
edges { node { `+exportFields+` } } pageInfo { hasNextPage endCursor } } }`, vars, &out)
	if err != nil {
		return nil, PageInfo{}, err
	}
	nodes, info := out.DataExports.page()
	return nodes, info, nil
}

// optionalSequence is a Uint64 variable, "" (omitted) for 0.
func optionalSequence(n uint64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatUint(n, 10)
}
