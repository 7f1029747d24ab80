-- Bookings that reach the practice system when the caller says yes, and the review
-- queue saying what a person must do.
--
-- With an external practice system (Cliniko) a booking is written there at booking
-- time. Each appointment says how far that write got: 'local' (nothing to write: the
-- world model is the practice system, or the booking was gone before it got there),
-- 'pending' (held here; a `practice_push` job queued in the same transaction retries
-- the write), 'pushed' (it is there), 'failed' (the job gave up and the clinic was told).
ALTER TABLE appointments
    ADD COLUMN practice_status  text NOT NULL DEFAULT 'local'
        CHECK (practice_status IN ('local', 'pending', 'pushed', 'failed')),
    ADD COLUMN practice_error   text;
CREATE INDEX appointments_practice_open ON appointments (practice_status)
    WHERE practice_status IN ('pending', 'failed');

-- A flagged event says what the clinic must do about it when that is more than
-- "look at this" (a booking already in the practice system, one that never got there).
ALTER TABLE clinical_events ADD COLUMN review_action text;
-- The practice system's own review items (a booking it never took) are events too.
ALTER TABLE clinical_events DROP CONSTRAINT clinical_events_source_check;
ALTER TABLE clinical_events ADD CONSTRAINT clinical_events_source_check
    CHECK (source IN ('tool', 'extraction', 'audio_verification', 'verification',
                      'operator', 'import', 'practice'));
