"""Template variables of the demo tables' ``defs.yaml`` files (``template_vars_module``): where ``privrelease
demo`` keeps each demo's files, so the YAML and the Python definitions (``demo.build_definitions``) agree."""

import dagster as dg

from dagster_privrelease.demo import DEMOS


@dg.template_var
def demo_folder(context: dg.ComponentLoadContext) -> str:
    """``$PRIVRELEASE_HOME/<demo>`` (default ``./demo/<demo>``), the demo named by the defs.yaml's folder."""
    return str(DEMOS[context.path.name].folder())


@dg.template_var
def demo_spec(context: dg.ComponentLoadContext) -> str:
    """The demo's spec, ``resources/<demo>.yaml`` of the repository."""
    return str(DEMOS[context.path.name].spec)
