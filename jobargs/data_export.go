package jobargs

import "github.com/google/uuid"

// DataExportJobArgs asks a worker to run an export.
type DataExportJobArgs struct {
	TenantID string    `json:"tenant_id"`
	ExportID uuid.UUID `json:"export_id"`
}

// Kind names the job.
func (DataExportJobArgs) Kind() string { return "data_export" }

// DeleteExportObjectArgs asks a worker to delete an expired export's object.
type DeleteExportObjectArgs struct {
	ObjectRef string `json:"object_ref"`
}

// Kind names the job.
func (DeleteExportObjectArgs) Kind() string { return "delete_export_object" }

// ExpireDataExportsArgs is the periodic job that expires READY exports past
// their expiresAt.
type ExpireDataExportsArgs struct{}

// Kind implements river.JobArgs.
func (ExpireDataExportsArgs) Kind() string { return "expire_data_exports" }
