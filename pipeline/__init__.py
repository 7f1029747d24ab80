"""Assembling one call's Pipecat pipeline: what it is built from (`CallDeps`), the
feature layers in their order, and the factory."""
