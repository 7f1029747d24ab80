"""Emotional intelligence (seed 000, layers 1–2 and "Emotional Adaptation"): readings
from the emotion providers, the caller's emotional state, steering, voice tone and
fillers. Plain functions and dataclasses; the processors in processors/ wire them in."""
