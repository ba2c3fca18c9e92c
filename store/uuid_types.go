package store

import (
	"context"

	"github.com/jackc/pgx/v5"
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
func ConfigurePool(cfg *pgxpool.Config) {
	next := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		pgxuuid.Register(conn.TypeMap())
		if next != nil {
			return next(ctx, conn)
		}
		return nil
	}
}
