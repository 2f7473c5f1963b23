"""The code location: everything under ``defs/`` (``dg dev`` here, or ``dagster dev -w workspace.yaml`` from the
repository root). Loading it parses the specs and touches no data and no file under ``$PRIVRELEASE_HOME``."""

from pathlib import Path

import dagster as dg


@dg.definitions
def defs() -> dg.Definitions:
    """The definitions of every ``defs.yaml`` and module under ``defs/``."""
    return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
