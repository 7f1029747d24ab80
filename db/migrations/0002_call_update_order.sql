-- When a call update last changed the row (the writer's clock at submit time).
-- A replayed update older than that only fills columns that are still empty, so
-- replaying the spool after an outage never rolls a call back to an earlier state.
ALTER TABLE calls ADD COLUMN updated_at timestamptz;
