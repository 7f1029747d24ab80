-- Several worker processes behind one port (and pods on one database).
--
-- A call's set-up from its answer, for the process its media stream reaches: what the
-- answer resolved (clinic, greeting, voice settings, graph id and version), stored with
-- the call and taken (deleted) by the stream that claims the call. A greeting may say a
-- callee's first name: the row lives only between the answer and the stream (the sweep
-- deletes the ones no stream took).
CREATE TABLE call_stream_setups (
    call_id     uuid PRIMARY KEY REFERENCES calls(id) ON DELETE CASCADE,
    setup       jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX call_stream_setups_created ON call_stream_setups (created_at);

-- The live-operations plane without Redis (ops/postgres_bus.py, ops/postgres_registry.py):
-- both are working state, rebuilt by the running processes, so they are not logged.
--
-- The active-call registry: one row per running call, kept alive by its process's
-- heartbeat; a row past `expires_at` is a call whose process is gone.
CREATE UNLOGGED TABLE ops_active_calls (
    call_id       text PRIMARY KEY,
    workspace_id  text NOT NULL,
    pod_id        text NOT NULL,
    entry         jsonb NOT NULL,
    expires_at    timestamptz NOT NULL
);
CREATE INDEX ops_active_calls_workspace ON ops_active_calls (workspace_id, expires_at);

-- Each call's recent observer events, for observers that join late (the newest
-- OBSERVER_REPLAY_EVENTS per call, an hour at most). An event too large for a NOTIFY
-- payload is announced by (call_id, seq) and read from here.
CREATE UNLOGGED TABLE ops_replay (
    id          bigserial PRIMARY KEY,
    call_id     text NOT NULL,
    seq         integer NOT NULL,
    event       text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ops_replay_call ON ops_replay (call_id, id);
CREATE INDEX ops_replay_created ON ops_replay (created_at);
