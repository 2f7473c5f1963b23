"""The m-invariance verifiers' individuals who left (``xiao_tao.DEPARTED``, kept by append: ``history.ARCHIVED``).

On a 13-release stream with text ids where people leave and come back several releases later, and where every
member of one published group leaves at once and comes back together, each release is judged through the
store's window (releases n-1 and n, the memo of release n-1, the archived rows of who comes back) and the
reports equal those of the complete history folded from scratch in memory (the independent reference: no memo,
every release folded from the first). The window's memo holds release n-1's individuals and the returners'
last appearances only, never everyone seen."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from dagster_privrelease import pipeline
from dagster_privrelease.core.judge.history import Report
from dagster_privrelease.core.judge.verifiers.single import fold_releases
from dagster_privrelease.core.judge.verifiers.xiao_tao import DEPARTED, m_invariance, m_invariance_step
from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.storage import ReleaseStore
from dagster_privrelease.storage.write import archive_table
from tests.core.judge.test_fast_judge import assert_same_report
from tests.storage.conftest import SPEC
from tests.test_judge_window import make_candidate, people

RELEASES = 13
#: The two m-invariance folds, by memo prefix: the verifier, and the model's (``verify_m_invariance``'s) with m=2.
FAMILIES = {"verifier.xiao_tao.m_invariance": lambda h: m_invariance(h, 2),
            "verifier.m_invariance": lambda h: fold_releases(h, "m_invariance", {"m": 2},
                                                             lambda part, state: m_invariance_step(part, state, 2))}


def text_ids(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with text ids: ``p007``-style, and bare zero-padded ``012`` for every fifth."""
    return rows.assign(pid=[f"{i:03d}" if i % 5 == 0 else f"p{i:03d}" for i in rows["pid"]])


@pytest.mark.slow  # 13 releases through the pipeline (every attack judges each): about 28 s
def test_returners_and_a_departed_group_are_judged_like_the_complete_history(tmp_path):
    store = ReleaseStore(tmp_path / "d.duckdb", parse_spec({**SPEC, "model": {"name": "l_diversity", "l": 2},
                                                             "seed": 11}))
    rng = np.random.default_rng(7)
    table = text_ids(people(np.arange(48), rng))
    away: dict[int, pd.DataFrame] = {}  # release -> the rows that come back in it
    group_left = returned = 0
    with store.session():
        for n in range(1, RELEASES + 1):
            make_candidate(store, n, table)
            if n > 2:
                window = store.history(candidate=n, since=n - 1)
                scratch = dataclasses.replace(store.history(candidate=n), memo={}, candidate_sets={})
                hosting = window.hosting
                assert hosting is not None
                previous = set(hosting.loc[hosting["release_id"] == n - 1, "pid"])
                now = set(hosting.loc[hosting["release_id"] == n, "pid"])
                for family, verify in FAMILIES.items():
                    gone = window.memo[(f"{family}.state.{DEPARTED}", n - 1)]
                    live = window.memo[(f"{family}.state.individuals", n - 1)]
                    assert set(live["pid"]) == previous, "the live entry holds release n-1's individuals"
                    assert set(gone["pid"]) <= now - previous, "only who comes back is read of who left"
                    returned += len(set(gone["pid"]))
                    reports = verify(window)
                    for a, b in zip(reports, verify(scratch), strict=True):
                        assert_same_report(a, b)
                    assert scratch.hosting is not None
                    assert_counts_by_definition(reports, scratch.hosting)
                    with store._open() as con:
                        kept = con.execute(f"SELECT count(*) FROM private.{archive_table(f'{family}.state.{DEPARTED}')}"
                                           ).fetchone()
                    assert kept is not None and len(gone) <= kept[0]
                store.save_judge_memo({k: f for k, f in window.memo.items()
                                       if k[1] == n and k[0].startswith(tuple(FAMILIES))})
            elif n == 2:  # the memo of release 2, folded from scratch: the windows go on from it
                complete = store.history(candidate=n)
                for verify in FAMILIES.values():
                    verify(complete)
                store.save_judge_memo({k: f for k, f in complete.memo.items()
                                       if k[1] == n and k[0].startswith(tuple(FAMILIES))})
            assert pipeline.publish(store, n, pipeline.judge(store, n))["release_id"] == n
            table, group_left = next_snapshot(store, n, table, away, rng, group_left)
    assert group_left, "a whole published group left"
    assert returned, "somebody came back"


def assert_counts_by_definition(reports: list[Report], hosting: pd.DataFrame) -> None:
    """The m-invariance report's figures as Xiao-Tao Lemma 4 defines them, from the hosting rows of every
    release: the individuals ever hosted, and the appearances compared with an earlier one (every group of an
    l-diverse release is published), a return after a gap included."""
    invariance = next(r for r in reports if r.name == "m_invariance")
    ids = hosting["pid"].astype(str)
    assert invariance.summary["individuals"] == ids.nunique()
    assert invariance.summary["republished"] == int(ids.duplicated().sum())


def next_snapshot(store: ReleaseStore, n: int, table: pd.DataFrame, away: dict[int, pd.DataFrame],
                  rng: np.random.Generator, group_left: int) -> tuple[pd.DataFrame, int]:
    """Release n+1's snapshot: 4 people leave for 3-5 releases, those due come back (their old rows), 3 newcomers
    arrive; after release 4 every member of its largest published group leaves too, for 5 releases."""
    lone = table.iloc[rng.choice(len(table), 4, replace=False)]
    group = table.iloc[:0]
    if n == 4:
        hosting = store.history(upto=n, since=n).hosting
        assert hosting is not None
        largest = hosting["group_id"].value_counts().index[0]
        group = table[table["pid"].isin(set(hosting.loc[hosting["group_id"] == largest, "pid"]))]
        lone = lone[~lone["pid"].isin(group["pid"])]
        group_left = len(group)
    for back, part in [(n + 6, group), *lone.groupby(rng.integers(n + 4, n + 7, len(lone)))]:
        away[int(back)] = pd.concat([away.get(int(back), table.iloc[:0]), part], ignore_index=True)
    gone = set(lone["pid"]) | set(group["pid"])
    fresh = text_ids(people(np.arange(3) + 100 + 3 * n, rng))
    table = pd.concat([table[~table["pid"].isin(gone)], away.pop(n + 1, table.iloc[:0]), fresh], ignore_index=True)
    return table, group_left
