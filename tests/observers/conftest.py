"""Each rules test reads the bundled data files afresh: the process-wide caches of the
compiled rules would otherwise let a test pass on what an earlier test loaded (and hide a
change to the loading code from the mutation run, `make mutation`)."""

import pytest

from processors.conversation.guidance_filter import directive_tags
from processors.conversation.quick_rules import quick_rules
from processors.safety.concepts import default_concepts
from processors.safety.red_flags import default_red_flags


@pytest.fixture(autouse=True)
def _rules_loaded_afresh():
    for cached in (quick_rules, directive_tags, default_concepts, default_red_flags):
        cached.cache_clear()
    yield
