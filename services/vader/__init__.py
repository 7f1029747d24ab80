"""Offline emotion in words: VADER valence and phrase rules."""
