-- Video visits and deposits. A clinic says where its video visits happen
-- (services.video_visits: {"provider": "daily"} or {"provider": "link", "link": "https://..."});
-- an appointment type says whether it is a video visit and what deposit it takes.
ALTER TABLE services ADD COLUMN video_visits jsonb;
ALTER TABLE appointment_types ADD COLUMN video boolean;
ALTER TABLE appointment_types ADD COLUMN deposit_cents integer CHECK (deposit_cents > 0);

-- The links a booking was given: its video visit's, and its deposit's (with when the
-- payment provider said it was paid). One of each per appointment: asking again finds
-- the one made (the providers' own requests are idempotent too).
CREATE TABLE visit_links (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id   uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    appointment_id uuid NOT NULL REFERENCES appointments(id) ON DELETE CASCADE,
    kind           text NOT NULL CHECK (kind IN ('video', 'payment')),
    provider       text NOT NULL,
    external_id    text,          -- the Daily room, the Stripe payment link (plink_...)
    url            text NOT NULL,
    amount_cents   integer,
    currency       text,
    call_id        uuid REFERENCES calls(id) ON DELETE SET NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz,
    paid_at        timestamptz,
    UNIQUE (appointment_id, kind)
);
CREATE INDEX visit_links_external ON visit_links (provider, external_id);
