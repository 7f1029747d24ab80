-- Memory across calls: what a patient told earlier calls, of a kind, from a source, with
-- its embedding (any model: the model's name beside the vector, cast to its dimension
-- when searched, as world_embeddings does) and how often later calls said it again.
-- A memory's weight halves every half-life since it was last said again (config
-- MEMORY_HALF_LIFE_DAYS); erasing the patient erases their memories (ON DELETE CASCADE).
ALTER TABLE memories
    ADD COLUMN kind text NOT NULL DEFAULT 'note'
        CHECK (kind IN ('fact', 'preference', 'event', 'note')),
    ADD COLUMN source text NOT NULL DEFAULT 'agent' CHECK (source IN ('agent', 'analysis')),
    ADD COLUMN source_turn integer,
    ADD COLUMN model text,
    ADD COLUMN embedding vector,
    ADD COLUMN reinforced_at timestamptz,
    ADD COLUMN reinforcements integer NOT NULL DEFAULT 0 CHECK (reinforcements >= 0),
    ADD CONSTRAINT memories_embedding_has_model CHECK ((embedding IS NULL) = (model IS NULL));

UPDATE memories SET reinforced_at = created_at;
ALTER TABLE memories
    ALTER COLUMN reinforced_at SET NOT NULL,
    ALTER COLUMN reinforced_at SET DEFAULT now();
