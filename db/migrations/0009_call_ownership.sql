-- Which service process carries each open call, so that a start, or a surviving pod's
-- sweeper, closes only the calls of a process that is gone (several pods may share one
-- database).

-- One row per service process. A process on the same machine (same host name, boot id
-- and PID namespace) is alive while its PID runs with the same start time; any other is
-- alive while its heartbeat is fresh. `stopped_at`: it shut down cleanly.
CREATE TABLE service_instances (
    id             text PRIMARY KEY,
    hostname       text NOT NULL,
    boot_id        text NOT NULL DEFAULT '',
    pid_namespace  text NOT NULL DEFAULT '',
    pid            integer NOT NULL,
    process_start  text NOT NULL DEFAULT '',
    started_at     timestamptz NOT NULL DEFAULT now(),
    heartbeat_at   timestamptz NOT NULL DEFAULT now(),
    stopped_at     timestamptz
);

-- The instance that answered the call, then the one carrying its media stream.
ALTER TABLE calls ADD COLUMN owner_instance text;
CREATE INDEX calls_open_by_owner ON calls (owner_instance, created_at) WHERE ended_at IS NULL;
