"""Live operations: observer events, the bus, the registry, operator commands."""
