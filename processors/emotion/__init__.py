"""Emotional intelligence: readings from the emotion providers, the caller's emotional
state, steering, voice tone and fillers. Plain functions and dataclasses; the processors
in processors/ wire them in."""
