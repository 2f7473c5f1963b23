"""The demo's change jobs, ``<demo>_demo_changes``: the first run creates a demo's source, each later run changes
some of its rows (``dagster_privrelease.demo.demo_changes``), so that its source sensor requests a release."""

import dagster as dg

from dagster_privrelease.demo import change_jobs


@dg.definitions
def defs() -> dg.Definitions:
    """One change job per demo table."""
    return dg.Definitions(jobs=change_jobs())
