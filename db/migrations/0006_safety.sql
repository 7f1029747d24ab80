-- Safety monitor (seed 000, "Safety & Monitoring"). Escalations are written on the call
-- (and read as the operator queue: open ones, newest first, per workspace through the
-- call); a workspace's own safety concepts keep their example embeddings per model.
CREATE TABLE escalations (
    id              bigserial PRIMARY KEY,
    call_id         uuid NOT NULL REFERENCES calls(id) ON DELETE CASCADE,
    seq             integer NOT NULL,
    concept         text NOT NULL,
    severity        text NOT NULL CHECK (severity IN ('hard', 'soft')),
    similarity      real,
    judge           text,
    reason          text,
    at_ms           integer,
    status          text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'acknowledged', 'resolved')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    acknowledged_at timestamptz,
    UNIQUE (call_id, seq)
);
CREATE INDEX escalations_open ON escalations (status, created_at DESC);

CREATE TABLE safety_concepts (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    key          text NOT NULL,
    name         text NOT NULL,
    severity     text NOT NULL CHECK (severity IN ('hard', 'soft')),
    description  text NOT NULL,
    examples     jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (workspace_id, key)
);

-- One row per example and embedding model; the dimension is stored with the vector
-- (vector columns of any dimension: a model change adds rows, never breaks old ones).
CREATE TABLE safety_concept_embeddings (
    concept_id    uuid NOT NULL REFERENCES safety_concepts(id) ON DELETE CASCADE,
    model         text NOT NULL,
    dimension     integer NOT NULL CHECK (dimension > 0),
    example_index integer NOT NULL,
    embedding     vector NOT NULL,
    PRIMARY KEY (concept_id, model, example_index),
    CHECK (vector_dims(embedding) = dimension)
);
