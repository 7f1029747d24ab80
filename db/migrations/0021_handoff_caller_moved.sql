-- When the caller was moved into the hand-off's conference. The person's leg can fail
-- (busy, no answer) before the caller is in the conference; whichever of the two comes
-- second, the failure or the move, takes the caller back to the agent, so the caller is
-- never left alone in a conference nobody will join.
ALTER TABLE handoffs ADD COLUMN caller_moved_at timestamptz;
