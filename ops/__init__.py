"""Live operations across pods: observer events, the event bus, the active-call
registry and operator commands."""
