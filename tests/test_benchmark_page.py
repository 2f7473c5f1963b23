"""`python -m benchmarks` writes each benchmark's section of the docs' Benchmarks page from what it printed."""

from __future__ import annotations

import datetime

from benchmarks import __main__ as runner
from benchmarks import common


def test_a_benchmark_section_holds_its_tables_skips_date_and_machine(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "RESULTS", common.Results())
    common.print_table("[bold]k = 5[/bold] on p001..p100", ["model", "ours s"], [["k | 5", 0.149]], note="note (x)")
    common.skip("Census-KDD", "no registry")

    written = runner.write_page("bench_toy", common.RESULTS, 12.4, folder=tmp_path)

    text = written.read_text()
    assert written == tmp_path / "bench_toy.md"
    assert text.startswith("### `bench_toy`\n\n`python -m benchmarks toy`, run ")
    assert " UTC in 12 s on " in text and "cores, load average" in text
    assert "**k = 5 on p001..p100**\n\n| model | ours s |\n|---|---|\n| k \\| 5 | 0.149 |\n\nnote (x)\n" in text
    assert text.endswith("- skipped Census-KDD: no registry\n")


def test_a_section_states_its_date():
    when = datetime.datetime(2026, 11, 27, 9, 5, tzinfo=datetime.UTC)
    text = common.page("bench_judge", common.Results(), 3.0, when=when)
    assert "run 2026-11-27 09:05 UTC in 3 s" in text and text.endswith("No table was printed.\n")
