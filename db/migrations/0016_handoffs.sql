-- Warm hand-offs: a call put through to a person (a clinic location's front desk, the
-- operator's phone) in a conference where the person hears a summary first. Each has why
-- it was asked for, where it went and how it ended:
--   dialling    the person's phone is ringing; the caller holds in the conference
--   answered    the person joined the caller
--   no_answer / busy / failed   the person could not be reached: the caller went back to
--               the agent (a callback offered)
--   declined    the person answered and hung up before joining
CREATE TABLE handoffs (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    call_id            uuid NOT NULL REFERENCES calls(id) ON DELETE CASCADE,
    workspace_id       uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    reason             text NOT NULL,
    destination        text NOT NULL,   -- "Downtown clinic", "operator", "front desk"
    number             text NOT NULL,   -- where the person was dialled (from records only)
    conference         text NOT NULL UNIQUE,
    caller_call_sid    text NOT NULL,
    operator_call_sid  text,
    outcome            text NOT NULL DEFAULT 'dialling'
        CHECK (outcome IN ('dialling', 'answered', 'no_answer', 'busy', 'failed',
                           'declined')),
    summary            text NOT NULL,
    -- the parties' turns, written while the agent is gone, are numbered past this
    seq_base           integer NOT NULL DEFAULT 0,
    started_at         timestamptz NOT NULL DEFAULT now(),
    answered_at        timestamptz,
    ended_at           timestamptz,
    -- when the caller, not reached, was taken back to the agent (once only)
    resumed_at         timestamptz
);
CREATE INDEX handoffs_call ON handoffs (call_id);
CREATE INDEX handoffs_operator_leg ON handoffs (operator_call_sid);
