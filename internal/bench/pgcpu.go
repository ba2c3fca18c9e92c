package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// clockTicks is the unit of utime and stime in /proc/<pid>/stat
// (sysconf(_SC_CLK_TCK), 100 on every Linux platform Go supports).
const clockTicks = 100

// pgCPUSnapshot is the CPU time of each PostgreSQL process that works for
// the bench database, by process id.
type pgCPUSnapshot map[int]time.Duration

// ownBackends, when set, returns the process ids of this run's client
// backends (see backendsOf): takePGCPU then counts only those among the
// bench database's backends, so that another bench run on the same
// database (other engineers share this machine's server) does not count.
var ownBackends func() map[int]bool

// benchApplicationName is the application_name of this run's connections.
func benchApplicationName(runID string) string { return "aether-bench-" + runID }

// backendsOf returns a function listing the process ids of pool's server's
// backends whose application_name is app (nil if the query fails).
func backendsOf(pool *pgxpool.Pool, app string) func() map[int]bool {
	return func() map[int]bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app)
		if err != nil {
			return nil
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return nil
		}
		own := make(map[int]bool, len(pids))
		for _, pid := range pids {
			own[int(pid)] = true
		}
		return own
	}
}

// takePGCPU reads the CPU time (user + system) of the PostgreSQL processes
// on this machine that work for database db: its client backends, and the
// server's own processes (postmaster, checkpointer, WAL writer, background
// writer, autovacuum), but not the client backends of other databases, so
// that other users of the server do not count. It returns nil when it finds
// none (a server on another machine, or no /proc).
func takePGCPU(db string) pgCPUSnapshot {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var own map[int]bool
	if ownBackends != nil {
		own = ownBackends()
	}
	snap := pgCPUSnapshot{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		comm, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil || !pgProcessOf(cmdline, db) {
			continue
		}
		if own != nil && isClientBackend(cmdline) && !own[pid] {
			continue // another run's backend on the same database
		}
		stat, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue
		}
		if cpu, ok := statCPU(stat); ok {
			snap[pid] = cpu
		}
	}
	if len(snap) == 0 {
		return nil
	}
	return snap
}

// pgProcessOf reports whether the process whose command line (its process
// title, for a PostgreSQL child) is cmdline counts for database db: a
// client backend ("postgres: 15/main: user db 127.0.0.1(port) state")
// counts when it names db; any other PostgreSQL process counts.
func pgProcessOf(cmdline []byte, db string) bool {
	if !isClientBackend(cmdline) {
		return true
	}
	for _, f := range processTitle(cmdline) {
		if f == db {
			return true
		}
	}
	return false
}

// processTitle splits a process's command line into its words.
func processTitle(cmdline []byte) []string {
	return strings.Fields(string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
}

// isClientBackend reports whether the PostgreSQL process whose command line
// is cmdline is a client backend (its title names a client address).
func isClientBackend(cmdline []byte) bool {
	for _, f := range processTitle(cmdline) {
		if f == "[local]" || (strings.Contains(f, "(") && strings.HasSuffix(f, ")")) {
			return true
		}
	}
	return false
}

// statCPU returns utime + stime from the contents of /proc/<pid>/stat.
func statCPU(stat []byte) (time.Duration, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	// After the command: state (field 3), ..., utime (14), stime (15).
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * time.Second / clockTicks, true
}

// since returns the CPU time the processes of now used after s: for each
// process, its CPU time less what it had in s (a process started in
// between counts whole). Processes that exited in between are lost.
func (now pgCPUSnapshot) since(s pgCPUSnapshot) time.Duration {
	var d time.Duration
	for pid, cpu := range now {
		d += cpu - s[pid]
	}
	return d
}

// serverSince is since for the server's own processes alone (not client
// backends): their work is for every database of the server, so on a shared
// server it includes other users' (WAL writes, checkpoints).
func (now pgCPUSnapshot) serverSince(s pgCPUSnapshot) time.Duration {
	var d time.Duration
	for pid, cpu := range now {
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil || isClientBackend(cmdline) {
			continue
		}
		d += cpu - s[pid]
	}
	return d
}
