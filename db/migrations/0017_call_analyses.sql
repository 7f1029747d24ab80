-- After the call: who the caller was identified as, and what a call's analysis found.

-- The patient the caller was identified as (set when the call ends; NULL: nobody). A
-- patient's later calls find their earlier ones by it.
ALTER TABLE calls ADD COLUMN patient_id uuid REFERENCES patients(id) ON DELETE SET NULL;
CREATE INDEX calls_patient_started ON calls (patient_id, started_at DESC)
    WHERE patient_id IS NOT NULL;

-- One analysis per call: its summary (what the caller wanted, what was done, what is left
-- for a person, concerns raised, each with the turns it comes from) and its quality score
-- on five dimensions (1-5, each with a reason and its turns). `analyst` says who wrote it:
-- `rules`, or the fast model (`model:google`, `model:anthropic`); a model that failed
-- leaves the rules' result with `fallback` naming why. Erasing a patient erases the
-- analyses of their calls (a summary holds what they said).
CREATE TABLE call_analyses (
    call_id        uuid PRIMARY KEY REFERENCES calls(id) ON DELETE CASCADE,
    workspace_id   uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    patient_id     uuid REFERENCES patients(id) ON DELETE CASCADE,
    analyst        text NOT NULL,
    fallback       text,
    summary        jsonb NOT NULL,
    quality        jsonb NOT NULL,
    quality_score  real NOT NULL CHECK (quality_score BETWEEN 1 AND 5),
    duration_ms    integer NOT NULL CHECK (duration_ms >= 0),
    analysed_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX call_analyses_by_score ON call_analyses (workspace_id, quality_score, call_id);
CREATE INDEX call_analyses_by_patient ON call_analyses (patient_id, analysed_at DESC)
    WHERE patient_id IS NOT NULL;
