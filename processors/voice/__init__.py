"""Processors that play or measure sound: greeting, spoken lines, volume, audio taps, typed input."""
