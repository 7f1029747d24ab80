"""Fixtures the conversation-engine tests share."""

import pytest


@pytest.fixture
def clinic(demo_clinic: tuple[str, str]) -> tuple[str, str]:
    """The demo clinic in a service of its own: (workspace, service)."""
    return demo_clinic
