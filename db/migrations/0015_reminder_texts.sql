-- Reminders by text. A clinic's campaign either calls its patients or texts them
-- (reminder_campaigns.channel); a text says which appointment it is about, and an
-- appointment gets one reminder text at most, however often the sweep or its job runs.
ALTER TABLE reminder_campaigns ADD COLUMN channel text NOT NULL DEFAULT 'call'
    CHECK (channel IN ('call', 'text'));
ALTER TABLE text_messages ADD COLUMN appointment_id uuid
    REFERENCES appointments(id) ON DELETE SET NULL;
CREATE UNIQUE INDEX text_messages_one_reminder ON text_messages (appointment_id)
    WHERE kind = 'reminder' AND appointment_id IS NOT NULL;
