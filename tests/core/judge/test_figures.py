"""The one rounding of the figures the package shows (``core.judge.report``: ``DIGITS``, ``rounded``,
``figure_text``), shared by the Dagster metadata, the certificate and the CLI."""

import numpy as np
import pytest

from dagster_privrelease.core.judge.report import DIGITS, figure_text, rounded


def test_floats_keep_four_significant_digits_and_counts_stay_whole():
    assert DIGITS == 4
    assert rounded(1.437456) == 1.437 and rounded(0.000123456) == 0.0001235 and rounded(188474.9) == 188500.0
    assert rounded(188474) == 188474 and isinstance(rounded(188474), int)


@pytest.mark.parametrize(("value", "text"), [
    (None, "-"), (float("nan"), "-"), (np.float64(np.inf), "-"), (np.float64(1.437456), "1.437"),
    (0.5, "0.5"), (188474, "188474"), (True, "True"), ("skipped", "skipped"),
])
def test_a_figure_as_text_is_rounded_like_the_metadata_and_a_missing_one_is_a_dash(value, text):
    assert figure_text(value) == text
