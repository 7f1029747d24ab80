-- Words the real-time recognizer kept missing, proposed per service as keyterms.
--
-- A term is proposed by the after-call verification (the recording re-transcribed) or by
-- another after-call source; an operator accepts it (it joins the service's keyterms) or
-- rejects it (it is never proposed again). `evidence` is the newest few sightings,
-- [{"call_id", "heard", "at_ms", "source"}]: `heard` is what the real-time side wrote
-- instead (what a caller said: it stays in the database). `score` weighs the sightings
-- (a low-confidence real-time word counts more).
CREATE TABLE stt_suggestions (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id  uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    service_id    uuid NOT NULL REFERENCES services(id) ON DELETE CASCADE,
    term          text NOT NULL CHECK (length(term) BETWEEN 1 AND 60),
    status        text NOT NULL DEFAULT 'proposed'
        CHECK (status IN ('proposed', 'accepted', 'rejected')),
    evidence      jsonb NOT NULL DEFAULT '[]',
    calls_missed  integer NOT NULL DEFAULT 0 CHECK (calls_missed >= 0),
    score         double precision NOT NULL DEFAULT 0,
    first_seen    timestamptz NOT NULL DEFAULT now(),
    last_seen     timestamptz NOT NULL DEFAULT now(),
    decided_at    timestamptz,
    decided_by    text
);
-- One row per term and service, whatever its case.
CREATE UNIQUE INDEX stt_suggestions_term ON stt_suggestions (service_id, lower(term));
CREATE INDEX stt_suggestions_by_status ON stt_suggestions (workspace_id, status, score DESC);

-- The calls a term was missed in and each source's weight of it there: a call counts once
-- however often it is re-verified (`calls_missed` and `score` are their count and sum).
CREATE TABLE stt_suggestion_calls (
    suggestion_id uuid NOT NULL REFERENCES stt_suggestions(id) ON DELETE CASCADE,
    call_id       uuid NOT NULL REFERENCES calls(id) ON DELETE CASCADE,
    source        text NOT NULL,
    weight        double precision NOT NULL CHECK (weight >= 0),
    PRIMARY KEY (suggestion_id, call_id, source)
);
