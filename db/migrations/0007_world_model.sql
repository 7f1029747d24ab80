-- The world model (seed 000, "World Model Integration", "Multi-Stage Verification",
-- "Patient Safety Isolation"): who the patients are clinically, what covers them, what
-- the agent wrote on each call and how far that is trusted.
--
-- Trust: every row the agent writes names who wrote it (`written_by`: 'tool:<name>',
-- 'extraction', 'verification:<stage>', 'operator', 'import'), the call it came from,
-- and a confidence: low < moderate < high < verified. Records the clinic already had
-- are 'verified'. Each agent write is also a `clinical_events` row, which the
-- verification pipeline judges after the call; only verified events may sync out.

ALTER TABLE patients
    ADD COLUMN mrn          text,
    ADD COLUMN address      text,
    ADD COLUMN timezone     text,
    ADD COLUMN preferences  jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN written_by   text NOT NULL DEFAULT 'import',
    ADD COLUMN confidence   text NOT NULL DEFAULT 'verified'
        CHECK (confidence IN ('low', 'moderate', 'high', 'verified')),
    ADD COLUMN updated_at   timestamptz NOT NULL DEFAULT now();
CREATE UNIQUE INDEX patients_mrn ON patients (workspace_id, mrn) WHERE mrn IS NOT NULL;
CREATE INDEX patients_dob ON patients (workspace_id, date_of_birth);

CREATE TABLE conditions (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    patient_id  uuid NOT NULL REFERENCES patients(id) ON DELETE CASCADE,
    name        text NOT NULL,
    status      text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'resolved')),
    noted_on    date,
    written_by  text NOT NULL DEFAULT 'import',
    confidence  text NOT NULL DEFAULT 'verified'
        CHECK (confidence IN ('low', 'moderate', 'high', 'verified')),
    source_call uuid REFERENCES calls(id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX conditions_patient ON conditions (patient_id);

CREATE TABLE medications (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    patient_id  uuid NOT NULL REFERENCES patients(id) ON DELETE CASCADE,
    name        text NOT NULL,
    dose        text NOT NULL DEFAULT '',
    frequency   text NOT NULL DEFAULT '',
    status      text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'stopped')),
    written_by  text NOT NULL DEFAULT 'import',
    confidence  text NOT NULL DEFAULT 'verified'
        CHECK (confidence IN ('low', 'moderate', 'high', 'verified')),
    source_call uuid REFERENCES calls(id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX medications_patient ON medications (patient_id);

CREATE TABLE allergies (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    patient_id  uuid NOT NULL REFERENCES patients(id) ON DELETE CASCADE,
    substance   text NOT NULL,
    reaction    text NOT NULL DEFAULT '',
    severity    text NOT NULL DEFAULT 'unknown'
        CHECK (severity IN ('mild', 'moderate', 'severe', 'unknown')),
    written_by  text NOT NULL DEFAULT 'import',
    confidence  text NOT NULL DEFAULT 'verified'
        CHECK (confidence IN ('low', 'moderate', 'high', 'verified')),
    source_call uuid REFERENCES calls(id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX allergies_patient ON allergies (patient_id);

-- The carriers a caller may name ("Blue Cross", "UHC"): matched fuzzily, never invented.
CREATE TABLE insurance_carriers (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id  uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name          text NOT NULL,
    aliases       text[] NOT NULL DEFAULT '{}',
    payer_id      text,
    UNIQUE (workspace_id, name)
);

CREATE TABLE insurance_coverages (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    patient_id       uuid NOT NULL REFERENCES patients(id) ON DELETE CASCADE,
    carrier_id       uuid REFERENCES insurance_carriers(id) ON DELETE SET NULL,
    carrier_name     text NOT NULL,
    plan_name        text NOT NULL DEFAULT '',
    member_id        text NOT NULL,
    group_number     text NOT NULL DEFAULT '',
    subscriber_name  text NOT NULL DEFAULT '',
    subscriber_dob   date,
    relationship     text NOT NULL DEFAULT 'self'
        CHECK (relationship IN ('self', 'spouse', 'child', 'other')),
    status           text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'inactive')),
    written_by       text NOT NULL DEFAULT 'import',
    confidence       text NOT NULL DEFAULT 'verified'
        CHECK (confidence IN ('low', 'moderate', 'high', 'verified')),
    source_call      uuid REFERENCES calls(id) ON DELETE SET NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (patient_id, carrier_name, member_id)
);

-- What the agent (or an import, or an operator) wrote, one row per write, typed and
-- timestamped. `payload` holds the values; `summary` is the human-readable line that
-- is embedded for search. Verification notes are appended per stage.
CREATE TABLE clinical_events (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id        uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    patient_id          uuid REFERENCES patients(id) ON DELETE CASCADE,
    call_id             uuid REFERENCES calls(id) ON DELETE SET NULL,
    type                text NOT NULL,
    payload             jsonb NOT NULL DEFAULT '{}',
    summary             text NOT NULL,
    occurred_at         timestamptz NOT NULL DEFAULT now(),
    source              text NOT NULL
        CHECK (source IN ('tool', 'extraction', 'audio_verification', 'verification',
                          'operator', 'import')),
    written_by          text NOT NULL,
    turn_seq            integer,        -- the caller turn it came from, when known
    confidence          text NOT NULL
        CHECK (confidence IN ('low', 'moderate', 'high', 'verified')),
    verification        text NOT NULL DEFAULT 'pending'
        CHECK (verification IN ('pending', 'approved', 'corrected', 'flagged', 'rejected')),
    verification_notes  jsonb NOT NULL DEFAULT '[]',
    entity_table        text,
    entity_id           uuid,
    synced_at           timestamptz,
    sync_target         text,
    sync_error          text
);
CREATE INDEX clinical_events_patient ON clinical_events (patient_id, occurred_at DESC);
CREATE INDEX clinical_events_call ON clinical_events (call_id);
CREATE INDEX clinical_events_review ON clinical_events (workspace_id, occurred_at DESC)
    WHERE verification = 'flagged';

-- One verification run per call and time it ran (re-runnable; the latest is current).
CREATE TABLE call_verifications (
    id              bigserial PRIMARY KEY,
    call_id         uuid NOT NULL REFERENCES calls(id) ON DELETE CASCADE,
    classification  text NOT NULL CHECK (classification IN ('clinical', 'junk')),
    reason          text NOT NULL DEFAULT '',
    judge           text NOT NULL,
    counts          jsonb NOT NULL DEFAULT '{}',
    ran_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX call_verifications_call ON call_verifications (call_id, ran_at DESC);

-- Outbound calls the agent promised ("we'll call you back tomorrow"): created with
-- their event in one transaction by ScheduleOutboundCall.
CREATE TABLE outbound_tasks (
    id                     uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id           uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    patient_id             uuid NOT NULL REFERENCES patients(id) ON DELETE CASCADE,
    reason                 text NOT NULL,
    goal                   text NOT NULL,
    priority               smallint NOT NULL CHECK (priority BETWEEN 1 AND 10),
    timezone               text NOT NULL,
    window_start           time NOT NULL,
    window_end             time NOT NULL CHECK (window_end > window_start),
    window_days            smallint[] NOT NULL,  -- 0 = Monday
    not_before             timestamptz NOT NULL,
    max_attempts           smallint NOT NULL CHECK (max_attempts BETWEEN 1 AND 10),
    retry_backoff_minutes  integer NOT NULL CHECK (retry_backoff_minutes > 0),
    attempts               smallint NOT NULL DEFAULT 0,
    status                 text NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'in_progress', 'done', 'failed', 'cancelled')),
    written_by             text NOT NULL,
    confidence             text NOT NULL
        CHECK (confidence IN ('low', 'moderate', 'high', 'verified')),
    source_call            uuid REFERENCES calls(id) ON DELETE SET NULL,
    created_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbound_tasks_due ON outbound_tasks (status, not_before);

-- Embeddings of patients ('patient': the record as text; 'patient_name': the name's
-- spelling) and events, one row per entity and model, the dimension stored with the
-- vector. Approximate-nearest-neighbour indexes are partial, one per kind and model at
-- that model's dimension (db/world_search.ensure_index creates them).
CREATE TABLE world_embeddings (
    entity_kind   text NOT NULL CHECK (entity_kind IN ('patient', 'patient_name', 'event')),
    entity_id     uuid NOT NULL,
    workspace_id  uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    model         text NOT NULL,
    dimension     integer NOT NULL CHECK (dimension > 0),
    embedding     vector NOT NULL,
    PRIMARY KEY (entity_kind, entity_id, model),
    CHECK (vector_dims(embedding) = dimension)
);
CREATE INDEX world_embeddings_workspace ON world_embeddings (workspace_id, entity_kind, model);

-- Where an entity lives in an external practice-management system (sync targets).
CREATE TABLE external_refs (
    system        text NOT NULL,            -- 'cliniko', ...
    entity_table  text NOT NULL,            -- 'patients', 'appointments', 'practitioners', ...
    entity_id     uuid NOT NULL,
    external_id   text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (system, entity_table, entity_id),
    UNIQUE (system, entity_table, external_id)
);
