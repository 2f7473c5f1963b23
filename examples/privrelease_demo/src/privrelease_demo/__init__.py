"""The example ``dg`` project: the demo tables of ``dagster_privrelease.demo``, each a ``defs.yaml`` of
``dagster_privrelease.ProtectedTableComponent`` under ``defs/``, and the demo's change jobs."""
