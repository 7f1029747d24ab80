-- Companion check-in calls (seed 003): what a person told earlier calls, and the
-- reminders the clinic asked the agent to bring up. Every write names its call.
CREATE TABLE memories (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    patient_id  uuid NOT NULL REFERENCES patients(id) ON DELETE CASCADE,
    text        text NOT NULL CHECK (length(text) BETWEEN 1 AND 1000),
    source_call uuid REFERENCES calls(id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memories_by_patient ON memories (patient_id, created_at DESC);

CREATE TABLE reminders (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    patient_id           uuid NOT NULL REFERENCES patients(id) ON DELETE CASCADE,
    text                 text NOT NULL,
    acknowledged_at      timestamptz,
    acknowledged_by_call uuid REFERENCES calls(id) ON DELETE SET NULL,
    created_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX reminders_open ON reminders (patient_id, created_at) WHERE acknowledged_at IS NULL;
