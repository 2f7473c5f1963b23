"""The cheap parts of staging: ``_with_id`` shares the frame's data and leaves the frame as it was."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pandas.testing as pdt
import pytest

from dagster_privrelease.storage.write import _with_id


def test_with_id_puts_release_id_first_and_shares_the_data():
    frame = pd.DataFrame({"group_id": np.arange(5), "age": ["[1, 2]"] * 5, "age__lo": np.ones(5)},
                         index=pd.RangeIndex(3, 8))
    before = frame.copy()
    out = _with_id(frame, 7)
    assert list(out.columns) == ["release_id", *frame.columns]
    assert out["release_id"].dtype == np.int64 and (out["release_id"] == 7).all()
    pdt.assert_index_equal(out.index, frame.index)
    pdt.assert_frame_equal(out.drop(columns="release_id"), before)
    pdt.assert_frame_equal(frame, before)  # the caller's frame has no new column
    for name in frame.columns:
        assert np.shares_memory(out[name].to_numpy(), frame[name].to_numpy()), name


def test_with_id_refuses_a_frame_with_release_id():
    with pytest.raises(ValueError, match="release_id, already exists"):
        _with_id(pd.DataFrame({"release_id": [1]}), 2)
