"""Offline prosody: how activated the caller sounds, from the signal alone."""
