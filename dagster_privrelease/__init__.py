"""dagster_privrelease: privacy-preserving re-publication of a changing table, as a Dagster plugin."""

__version__ = "0.1.0"
