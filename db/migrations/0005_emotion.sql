-- Emotional intelligence (seed 000): what each caller turn sounded like, the voice
-- tone each agent turn used, and the call's emotional summary at its end.
ALTER TABLE turns
    ADD COLUMN emotion text,
    ADD COLUMN valence real,
    ADD COLUMN arousal real,
    ADD COLUMN tone    text;
ALTER TABLE calls ADD COLUMN emotional_summary jsonb;
