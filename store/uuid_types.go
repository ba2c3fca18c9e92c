package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxuuid "github.com/vgarvardt/pgx-google-uuid/v5"
)

// ConfigurePool makes every connection of cfg encode and scan
// github.com/google/uuid values as PostgreSQL's binary uuid directly. By
// default pgx knows uuid.UUID only as a driver.Valuer and sql.Scanner: each
// id written goes through its 36-character string (5–6 µs and 19
// allocations per value, the COPY of a recorded batch included) and each
// one read is parsed back from text. It keeps an AfterConnect hook cfg has
// already, after its own. Every pool of the service is configured with it.
//
// A binary uuid scanned into a *uuid.UUID is copied into it (uuidCodec):
// pgx tries a target's sql.Scanner before the uuid package's scan plan,
// and uuid.UUID's Scan takes the value as a 36-character string, one
// allocation and a parse per id read (every uuid column of sqlc's rows).
func ConfigurePool(cfg *pgxpool.Config) {
	next := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		pgxuuid.Register(conn.TypeMap())
		conn.TypeMap().RegisterType(&pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}})
		if next != nil {
			return next(ctx, conn)
		}
		return nil
	}
}

// uuidCodec is the uuid package's codec, with binary values scanned into a
// *uuid.UUID by a copy.
type uuidCodec struct{ pgxuuid.UUIDCodec }

// PlanScan implements pgtype.Codec.
func (c uuidCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*uuid.UUID); ok && format == pgtype.BinaryFormatCode {
		return scanBinaryUUID{}
	}
	return c.UUIDCodec.PlanScan(m, oid, format, target)
}

// scanBinaryUUID copies a binary uuid into a *uuid.UUID.
type scanBinaryUUID struct{}

// Scan implements pgtype.ScanPlan. A NULL leaves dst as it is, as
// uuid.UUID's Scan does.
func (scanBinaryUUID) Scan(src []byte, dst any) error {
	if src == nil {
		return nil
	}
	if len(src) != len(uuid.UUID{}) {
		return fmt.Errorf("invalid length for uuid: %d", len(src))
	}
	copy(dst.(*uuid.UUID)[:], src)
	return nil
}
