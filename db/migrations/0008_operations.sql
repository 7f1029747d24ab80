-- Operations surface (seed 000, "Calls API", "Recordings", "Observer WebSocket"):
-- ground-truth transcripts, word timings, operator actions on escalations, and the
-- indexes the calls history filters on.

-- A re-transcription of the recording by a batch model, and how far the real-time
-- transcript was from it (1 - WER). Words: [{"word", "start_ms", "end_ms", "speaker",
-- "confidence"}] on the recording's clock.
ALTER TABLE calls
    ADD COLUMN verified_transcript    text,
    ADD COLUMN verified_words         jsonb,
    ADD COLUMN transcript_accuracy    double precision,
    ADD COLUMN transcript_verified_at timestamptz,
    ADD COLUMN transcript_verifier    text;

-- Word timings of a turn as heard (STT) or spoken (TTS), on the recording's clock:
-- [{"word", "start_ms", "end_ms"}]. NULL when the provider gave none.
ALTER TABLE turns ADD COLUMN words jsonb;

-- Who acted on an escalation, and when it was closed.
ALTER TABLE escalations
    ADD COLUMN acknowledged_by text,
    ADD COLUMN resolved_at     timestamptz;

-- History: newest first per workspace with a stable tie-break (cursor pagination),
-- and the filters that look into child tables.
DROP INDEX IF EXISTS calls_workspace_started;
CREATE INDEX calls_workspace_started ON calls (workspace_id, started_at DESC, id DESC);
CREATE INDEX tool_calls_errors ON tool_calls (call_id) WHERE error_class IS NOT NULL;
