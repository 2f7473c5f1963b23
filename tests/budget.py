"""The example budget of the property tests: every Hypothesis test runs in ``make test``, on a quarter of its
examples (profile ``quick``, the default), and on all of them in ``make test-slow`` (``HYPOTHESIS_PROFILE=full``,
or pytest's ``--hypothesis-profile full``).

A test states its full count as ``@settings(max_examples=examples(300))``; a test that states none gets the
profile's own count (25 or Hypothesis's default, 100), so both kinds scale alike.
"""

from __future__ import annotations

import os

from hypothesis import settings

#: Hypothesis's own default count, the one the full profile keeps.
FULL_COUNT = 100

settings.register_profile("quick", max_examples=FULL_COUNT // 4)
settings.register_profile("full", max_examples=FULL_COUNT)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "quick"))


def examples(full: int) -> int:
    """The examples a property test runs in the active profile: ``full`` scaled as the profile scales
    Hypothesis's default count (``full`` itself in ``full``, a quarter in ``quick``), never fewer than 5 nor more
    than ``full``. Read at import, so the profile must be loaded before the test modules are (conftest does)."""
    return min(full, max(5, round(full * settings().max_examples / FULL_COUNT)))
