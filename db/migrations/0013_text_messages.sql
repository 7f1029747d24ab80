-- Texts the clinic sends (a booking's confirmation, a reminder, a video-visit or payment
-- link), each with the call it came from and how far Twilio got with it, and the
-- numbers that texted STOP to a clinic of the workspace.
--
-- A text is written 'unsent' before Twilio is asked, so one whose answer was lost is
-- still on record; Twilio's answer gives it its SID and status, and its status
-- callbacks move it on (Twilio's own statuses: accepted, queued, sending, sent,
-- delivered, undelivered, failed, read, canceled).
-- 'refused': Twilio would not take it (the error code says why: 21610 opted out).
CREATE TABLE text_messages (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id  uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    call_id       uuid REFERENCES calls(id) ON DELETE SET NULL,
    patient_id    uuid REFERENCES patients(id) ON DELETE CASCADE,
    kind          text NOT NULL
        CHECK (kind IN ('confirmation', 'reminder', 'telehealth_link', 'payment_link')),
    to_number     text NOT NULL,
    from_number   text,
    body          text NOT NULL,
    sid           text UNIQUE,
    status        text NOT NULL DEFAULT 'unsent'
        CHECK (status IN ('unsent', 'accepted', 'scheduled', 'queued', 'sending', 'sent',
                          'delivered', 'undelivered', 'failed', 'read', 'canceled',
                          'refused')),
    error_code    integer,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX text_messages_call ON text_messages (call_id) WHERE call_id IS NOT NULL;
CREATE INDEX text_messages_patient ON text_messages (patient_id) WHERE patient_id IS NOT NULL;

-- A number that texted STOP gets no text from the workspace's clinics until it texts
-- START (Twilio refuses them anyway; this is how the agent knows before it offers one).
CREATE TABLE text_opt_outs (
    workspace_id  uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    phone         text NOT NULL,
    opted_out_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, phone)
);
