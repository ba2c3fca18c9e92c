package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reachable reports whether a PostgreSQL server accepts a connection at url
// within two seconds. Tools use it to pick a server to work with.
func Reachable(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return false
	}
	_ = conn.Close(ctx)
	return true
}
