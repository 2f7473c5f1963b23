"""The example code location ``workspace.yaml`` loads: the Adult and Census-KDD workers demos, both republished
with m-invariance (m = 4), defined in ``dagster_privrelease.demo``. Their files live under ``$PRIVRELEASE_HOME``
(default ``./demo``); loading this module touches no data and no file."""

from dagster_privrelease.demo import build_definitions

defs = build_definitions()
