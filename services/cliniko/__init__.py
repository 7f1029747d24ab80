"""Cliniko's public REST API as the practice system."""
