"""Callers with goals: persona files, a rule-based (or model-played) caller who answers the agent, and the judge of its call record."""
