-- Foundation schema: tenants, keys, voice settings, services and the call record.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE workspaces (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name        text NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Only the SHA-256 of a key is stored; the plaintext is shown once at creation.
CREATE TABLE api_keys (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id  uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name          text NOT NULL DEFAULT '',
    prefix        text NOT NULL,
    key_hash      text NOT NULL UNIQUE,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz,
    revoked_at    timestamptz
);

-- Raw JSON as edited; parsed with per-field defaults by services/voice_settings.py.
CREATE TABLE voice_settings (
    workspace_id  uuid PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
    settings      jsonb NOT NULL DEFAULT '{}',
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- A service is what an inbound number reaches (a clinic's scheduling line).
CREATE TABLE services (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id  uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name          text NOT NULL,
    phone_number  text UNIQUE,
    keyterms      text[] NOT NULL DEFAULT '{}',
    greeting      text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (workspace_id, name)
);

CREATE TABLE calls (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id       uuid REFERENCES workspaces(id) ON DELETE CASCADE,
    service_id         uuid REFERENCES services(id) ON DELETE SET NULL,
    call_sid           text UNIQUE,
    direction          text NOT NULL CHECK (direction IN ('inbound', 'outbound', 'eval', 'webrtc')),
    from_number        text,
    to_number          text,
    status             text NOT NULL,
    twilio_status      text,
    twilio_duration_s  integer,
    started_at         timestamptz NOT NULL DEFAULT now(),
    connected_at       timestamptz,
    ended_at           timestamptz,
    duration_s         double precision,
    completion_reason  text,
    final_state        text,
    config_snapshot    jsonb NOT NULL DEFAULT '{}',
    recording_path     text,
    created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX calls_workspace_started ON calls (workspace_id, started_at DESC);

-- Timing fields follow the five-layer model, in ms from the start of the media stream.
CREATE TABLE turns (
    id                     bigserial PRIMARY KEY,
    call_id                uuid NOT NULL REFERENCES calls(id) ON DELETE CASCADE,
    seq                    integer NOT NULL,
    speaker_id             text NOT NULL,
    speaker_role           text NOT NULL CHECK (speaker_role IN ('caller', 'agent', 'operator')),
    text                   text NOT NULL,
    interrupted            boolean NOT NULL DEFAULT false,
    user_speech_start_ms   integer,
    user_speech_end_ms     integer,
    engine_ms              integer,
    nav_ms                 integer,
    render_ms              integer,
    audio_ttfb_ms          integer,
    agent_speech_start_ms  integer,
    agent_speech_end_ms    integer,
    created_at             timestamptz NOT NULL DEFAULT now(),
    UNIQUE (call_id, seq)
);

CREATE TABLE state_transitions (
    id              bigserial PRIMARY KEY,
    call_id         uuid NOT NULL REFERENCES calls(id) ON DELETE CASCADE,
    seq             integer NOT NULL,
    previous_state  text,
    next_state      text NOT NULL,
    reason          text,
    at_ms           integer,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (call_id, seq)
);

CREATE TABLE tool_calls (
    id             bigserial PRIMARY KEY,
    call_id        uuid NOT NULL REFERENCES calls(id) ON DELETE CASCADE,
    tool_call_id   text NOT NULL,
    name           text NOT NULL,
    input          jsonb,
    output         jsonb,
    started_ms     integer,
    duration_ms    integer,
    succeeded      boolean,
    error_class    text,
    error_message  text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (call_id, tool_call_id)
);

CREATE TABLE call_events (
    id          bigserial PRIMARY KEY,
    call_id     uuid NOT NULL REFERENCES calls(id) ON DELETE CASCADE,
    seq         integer NOT NULL,
    type        text NOT NULL,
    data        jsonb NOT NULL DEFAULT '{}',
    at_ms       integer,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (call_id, seq)
);
