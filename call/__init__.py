"""One call's state: identity and lifecycle, the call log, recordings, the frames processors exchange."""
