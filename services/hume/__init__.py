"""Hume: realtime expression measurement (how the caller sounds)."""
