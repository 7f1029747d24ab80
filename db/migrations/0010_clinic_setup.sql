-- A clinic set up by its operators: every number that reaches it, the days it is closed,
-- what it no longer offers (kept for the bookings that name it), keys with a role, and
-- an audit trail of every administrative change.

-- Every number that reaches a clinic (a service). A number reaches one clinic at most;
-- one connected through Twilio keeps the Twilio number's SID.
CREATE TABLE service_numbers (
    phone_number  text PRIMARY KEY,
    service_id    uuid NOT NULL REFERENCES services(id) ON DELETE CASCADE,
    twilio_sid    text,
    connected_at  timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX service_numbers_service ON service_numbers (service_id);
INSERT INTO service_numbers (phone_number, service_id)
    SELECT phone_number, id FROM services WHERE phone_number IS NOT NULL;
ALTER TABLE services DROP COLUMN phone_number;

-- Days a clinic, or one of its locations, is closed (holidays, training days, repairs),
-- inclusive of both dates, with the reason callers hear.
CREATE TABLE closures (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    service_id   uuid NOT NULL REFERENCES services(id) ON DELETE CASCADE,
    location_id  uuid REFERENCES locations(id) ON DELETE CASCADE,  -- NULL: every location
    starts_on    date NOT NULL,
    ends_on      date NOT NULL CHECK (ends_on >= starts_on),
    reason       text NOT NULL
);
CREATE INDEX closures_service ON closures (service_id, ends_on);

-- A location, practitioner or appointment type taken out of a clinic's file while
-- bookings still name it: it is retired (never offered again), not deleted.
ALTER TABLE locations ADD COLUMN retired_at timestamptz;
ALTER TABLE practitioners ADD COLUMN retired_at timestamptz;
ALTER TABLE appointment_types ADD COLUMN retired_at timestamptz;
-- A retired name may be used again by a new entry.
ALTER TABLE locations DROP CONSTRAINT locations_service_id_name_key;
CREATE UNIQUE INDEX locations_live_name ON locations (service_id, name) WHERE retired_at IS NULL;
ALTER TABLE practitioners DROP CONSTRAINT practitioners_service_id_name_key;
CREATE UNIQUE INDEX practitioners_live_name ON practitioners (service_id, name)
    WHERE retired_at IS NULL;
ALTER TABLE appointment_types DROP CONSTRAINT appointment_types_service_id_name_key;
CREATE UNIQUE INDEX appointment_types_live_name ON appointment_types (service_id, name)
    WHERE retired_at IS NULL;

-- What a key may do: admin (settings, clinic set-up, keys), operator (watch, take over,
-- escalations, review queue), read_only (history and recordings). Existing keys keep
-- the full rights they had.
ALTER TABLE api_keys ADD COLUMN role text NOT NULL DEFAULT 'admin'
    CHECK (role IN ('admin', 'operator', 'read_only'));

-- The workspace whose admin created this one (NULL: created from the command line).
ALTER TABLE workspaces ADD COLUMN created_by uuid REFERENCES workspaces(id) ON DELETE SET NULL;

-- Who changed what, from what to what, and when. `actor`: "key vk_<prefix>" or "cli".
CREATE TABLE audit_log (
    id            bigserial PRIMARY KEY,
    workspace_id  uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    actor         text NOT NULL,
    action        text NOT NULL,
    target        text NOT NULL DEFAULT '',
    before        jsonb,
    after         jsonb,
    at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_workspace ON audit_log (workspace_id, at DESC, id DESC);
