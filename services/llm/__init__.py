"""Emotion in words scored by the configured fast language model."""
