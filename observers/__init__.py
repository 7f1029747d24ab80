"""Pipecat observers: they watch every frame and change none (the call record)."""
