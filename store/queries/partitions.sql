-- name: CreatePastPartitions :many
-- The partitions of the past months in [since's month, before) whose rows
-- sit in the DEFAULT partition of table (audit_events or a registered
-- table), which they then hold, through the SECURITY DEFINER function of
-- migration 00033; the names of those created.
SELECT p.name::text AS name
FROM aether_create_past_partitions((@table_name::text)::regclass, @since::timestamptz, @before::timestamptz) AS p (name);
