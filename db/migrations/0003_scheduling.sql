-- The scheduling world model the booking graph runs on: where and when a clinic sees
-- people, who sees them, what for and at what price, and the bookings themselves.
-- Slots are not stored: they are produced from schedules minus live bookings.

CREATE TABLE locations (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    service_id    uuid NOT NULL REFERENCES services(id) ON DELETE CASCADE,
    name          text NOT NULL,
    timezone      text NOT NULL,
    address       text NOT NULL DEFAULT '',
    phone_number  text,           -- where a caller may be transferred; never invented
    -- {"mon": ["08:00", "17:00"], ...}; a missing day is closed
    opening_hours jsonb NOT NULL DEFAULT '{}',
    UNIQUE (service_id, name)
);

CREATE TABLE practitioners (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    service_id        uuid NOT NULL REFERENCES services(id) ON DELETE CASCADE,
    name              text NOT NULL,
    title             text NOT NULL DEFAULT '',
    years_experience  integer,
    UNIQUE (service_id, name)
);

CREATE TABLE appointment_types (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    service_id    uuid NOT NULL REFERENCES services(id) ON DELETE CASCADE,
    name          text NOT NULL,
    description   text NOT NULL DEFAULT '',
    duration_min  integer NOT NULL CHECK (duration_min > 0),
    price_cents   integer NOT NULL CHECK (price_cents >= 0),
    currency      text NOT NULL DEFAULT 'USD',
    keywords      text[] NOT NULL DEFAULT '{}',  -- what callers call it ("physio", "jab")
    UNIQUE (service_id, name)
);

-- A practitioner's recurring weekly hours at one location, and what they offer there.
CREATE TABLE schedules (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    practitioner_id      uuid NOT NULL REFERENCES practitioners(id) ON DELETE CASCADE,
    location_id          uuid NOT NULL REFERENCES locations(id) ON DELETE CASCADE,
    weekday              smallint NOT NULL CHECK (weekday BETWEEN 0 AND 6),  -- 0 = Monday
    starts               time NOT NULL,
    ends                 time NOT NULL CHECK (ends > starts),
    appointment_type_ids uuid[] NOT NULL,
    valid_from           date NOT NULL DEFAULT '2000-01-01',
    valid_until          date
);
CREATE INDEX schedules_practitioner ON schedules (practitioner_id);

CREATE TABLE patients (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id   uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    first_name     text NOT NULL,
    last_name      text NOT NULL,
    date_of_birth  date NOT NULL,
    phone          text,
    email          text,
    created_by_call uuid REFERENCES calls(id) ON DELETE SET NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);
-- One record per person: the same name and date of birth is the same patient.
CREATE UNIQUE INDEX patients_identity
    ON patients (workspace_id, lower(first_name), lower(last_name), date_of_birth);
CREATE INDEX patients_phone ON patients (workspace_id, phone);

CREATE TABLE appointments (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    patient_id           uuid NOT NULL REFERENCES patients(id) ON DELETE CASCADE,
    practitioner_id      uuid NOT NULL REFERENCES practitioners(id),
    location_id          uuid NOT NULL REFERENCES locations(id),
    appointment_type_id  uuid NOT NULL REFERENCES appointment_types(id),
    starts_at            timestamptz NOT NULL,
    ends_at              timestamptz NOT NULL CHECK (ends_at > starts_at),
    status               text NOT NULL DEFAULT 'booked'
                         CHECK (status IN ('booked', 'confirmed', 'cancelled', 'completed')),
    created_by_call      uuid REFERENCES calls(id) ON DELETE SET NULL,
    changed_by_call      uuid REFERENCES calls(id) ON DELETE SET NULL,
    rescheduled_from     uuid REFERENCES appointments(id),
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now()
);
-- A practitioner is never booked twice at the same start (two callers racing for
-- one slot: the second write fails and that caller is offered another time).
CREATE UNIQUE INDEX appointments_one_per_slot
    ON appointments (practitioner_id, starts_at) WHERE status IN ('booked', 'confirmed');
CREATE INDEX appointments_patient ON appointments (patient_id, starts_at);
CREATE INDEX appointments_practitioner_time ON appointments (practitioner_id, starts_at);

CREATE TABLE waitlist_entries (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    patient_id           uuid NOT NULL REFERENCES patients(id) ON DELETE CASCADE,
    appointment_type_id  uuid REFERENCES appointment_types(id),
    note                 text NOT NULL DEFAULT '',
    created_by_call      uuid REFERENCES calls(id) ON DELETE SET NULL,
    created_at           timestamptz NOT NULL DEFAULT now()
);

-- What EscalateToHuman leaves for the clinic: someone calls this person back.
CREATE TABLE callback_requests (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    service_id    uuid REFERENCES services(id) ON DELETE SET NULL,
    call_id       uuid REFERENCES calls(id) ON DELETE SET NULL,
    patient_id    uuid REFERENCES patients(id) ON DELETE SET NULL,
    phone         text,
    reason        text NOT NULL,
    message       text NOT NULL DEFAULT '',
    urgent        boolean NOT NULL DEFAULT false,
    status        text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'done')),
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- Graph versions per workspace/service; a call snapshots the one it ran.
CREATE TABLE context_graphs (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id  uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    service_id    uuid REFERENCES services(id) ON DELETE CASCADE,
    graph_id      text NOT NULL,
    version       integer NOT NULL,
    definition    jsonb NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (workspace_id, graph_id, version)
);
CREATE INDEX context_graphs_latest ON context_graphs (workspace_id, graph_id, version DESC);

-- Which graph a service's calls run (its latest stored version, else the bundled one).
ALTER TABLE services ADD COLUMN graph_id text NOT NULL DEFAULT 'clinic_booking';
