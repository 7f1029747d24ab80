"""Deepgram adapter: Pipecat's service, made to survive a dropped or stalled stream."""
