"""The ``privrelease`` command: publish, inspect, verify and attack a release history stored in DuckDB.

Every command that refuses (a bad spec, a bad snapshot, an out-of-order release, a model or judge that will
not publish, a broken guarantee, a disclosing attack) prints the reason and exits with status 1.

Run as the console script, the process ends as soon as the command is done (``leave``): its exit handlers run and
its output is flushed, but the interpreter does not tear down the modules and objects of Dagster and Great
Expectations one by one (about 1.5 s of CPU after a release, for memory the operating system frees anyway).
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn

import duckdb
import numpy as np
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.status import Status
from rich.table import Table

from .core.judge.history import Report
from .core.judge.report import figure_text
from .core.progress import LineReporter, Reporter, line
from .core.spec import Spec, load_spec
from .errors import PrivReleaseError
from .pipeline import check_model, model_spec, read_snapshot, release_changes
from .storage import ReleaseStore, read_manifest, unreadable


class ConsoleApp(typer.Typer):
    """The ``privrelease`` command: a ``typer.Typer`` that, called as the console script (no arguments: it reads
    ``sys.argv``), ends the process with ``leave`` when the command is done. Called with arguments (by a program
    or a test), it behaves as any ``typer.Typer``."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the command line: ``args``/``kwargs`` as ``typer.Typer``'s, or the process's own, then ``leave``."""
        if args or kwargs:
            return super().__call__(*args, **kwargs)
        try:
            code = super().__call__()
        except SystemExit as exc:
            leave(exc.code)
        leave(code)


def leave(code: str | int | None = 0) -> NoReturn:
    """End the process with ``code`` as ``sys.exit`` would (None: 0; an int: itself; else printed, 1), without the
    interpreter's teardown of every module and object: run the exit handlers (``atexit``: temporary folders,
    logging), flush stdout and stderr, then ``os._exit``. Falls back to ``sys.exit`` while a non-daemon thread
    other than this one is alive (the interpreter would wait for it). The release store is closed by then (its
    session ends with the command), and DuckDB has written every committed transaction to its file."""
    others = [t for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon]
    if others or threading.current_thread() is not threading.main_thread():
        sys.exit(code)
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:
        sys.stderr.write(f"{code}\n")
        status = 1
    atexit._run_exitfuncs()  # noqa: SLF001  (CPython's own exit handlers, as the interpreter runs them at exit)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(status)


app = ConsoleApp(
    name="privrelease",
    help="Privacy-preserving re-publication of a changing table, stored in one DuckDB file per table.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
#: Wide enough for the summary tables when the output is not a terminal (rich would assume 80 columns).
console = Console(width=None if sys.stdout.isatty() else 150)
errors = Console(stderr=True)

SpecPath = Annotated[Path, typer.Option("--spec", help="the release spec (YAML) of the protected table")]
DbPath = Annotated[Path, typer.Option("--db", help="the DuckDB file of the protected table's releases")]
SnapshotPath = Annotated[Path, typer.Option("--snapshot", help="the table's current rows, CSV or Parquet")]
AttributesOption = Annotated[
    str | None, typer.Option(help="comma-separated quasi-identifiers to publish (default: all of the spec's)")
]
#: The choices of ``demo --table``: the demo registry's tables (``demo.DEMOS``, whose import costs Dagster's: a
#: test keeps the two equal) and ``all``.
DemoTable = Literal["adult", "census_kdd", "census_kdd_m_distinct", "adult_requests", "adult_xy", "all"]


@contextmanager
def refusals(db: Path | None = None) -> Iterator[None]:
    """Turn the package's errors into ``error: <message>`` on stderr and exit status 1, and so a DuckDB error that
    reached the command: re-worded from names (``storage.unreadable``, naming ``db``, the release store the
    command works on), never its own text, which may quote stored values."""
    try:
        yield
    except PrivReleaseError as exc:
        errors.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from exc
    except duckdb.Error as exc:
        errors.print(f"[bold red]error:[/] {unreadable(db or 'the release store', 'release store', exc)}",
                     highlight=False, soft_wrap=True)
        raise typer.Exit(1) from exc


def progress() -> Progress:
    """A progress bar on ``console`` that disappears when done (rich draws nothing when it is not a terminal)."""
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console, transient=True)


class StatusSteps:
    """A release's steps on a terminal (``core.progress.Reporter``): the rich status line names the step that is
    running (the innermost), and each finished step is printed above it with its seconds."""

    def __init__(self, status: Status) -> None:
        self.status = status
        self.running: list[str] = []

    def started(self, name: str) -> None:
        """Show ``name`` as the running step."""
        self.running.append(name)
        self.status.update(f"{name} …")

    def finished(self, name: str, seconds: float) -> None:
        """Print ``name: seconds s`` and show the step around it (if any) as running again."""
        self.running.remove(name)
        console.print(f"[green]✓[/] {line(name, seconds)}", highlight=False, soft_wrap=True)
        self.status.update(f"{self.running[-1]} …" if self.running else "releasing …")


@contextmanager
def showing_steps() -> Iterator[Reporter]:
    """What hears a release's steps (``core.progress``): on a terminal a rich status line with the running step and
    a line per finished step (``StatusSteps``); otherwise (a pipe, a log file) one line per finished step,
    ``<step>: <seconds> s``, printed as it ends."""
    if console.is_terminal:
        with console.status("releasing …") as status:
            yield StatusSteps(status)
    else:
        yield LineReporter(lambda text: console.print(text, highlight=False, soft_wrap=True))


def existing_store(db: Path, spec: Spec) -> ReleaseStore:
    """The store at ``db``; refuses a path with no file rather than creating an empty store."""
    if not db.exists():
        raise typer.BadParameter(f"{db}: no release store there", param_hint="--db")
    return ReleaseStore(db, spec)


def judged_store(db: Path, spec: Spec) -> ReleaseStore:
    """The store at ``db`` (``existing_store``) for ``verify`` and ``attack``, which judge a history with the model
    and parameters its last release was published with: ``spec`` must repeat them (``pipeline.check_model``)."""
    store = existing_store(db, spec)
    check_model(store)
    return store


@app.command()
def release(
    spec: SpecPath,
    db: DbPath,
    snapshot: SnapshotPath,
    attributes: AttributesOption = None,
) -> None:
    """Publish SNAPSHOT as the next release of the table.

    The Dagster release job runs in-process: stage the snapshot, run the model, run the blocking checks, publish.
    A SNAPSHOT with the rows of the last published release publishes nothing (exit 0, "unchanged"), so running
    the same command again is safe. After a refusal, fix the data and run it again: the refused snapshot is
    replaced, nothing has to be discarded. Each step is shown as it runs (staging, the model's phases, the
    judge's verifiers and attacks, publication), with its seconds."""
    from .orchestration import run_release

    names = [a.strip() for a in attributes.split(",") if a.strip()] if attributes else None
    with refusals(db):
        loaded = load_spec(spec)
        frame = read_snapshot(snapshot, loaded)
        model_spec(loaded, names)  # a refused --attributes leaves no store file behind
        # one session of the store for the whole release, its report included: the file is opened once and stays
        # locked, so another process releasing to it waits for the lock, then refuses naming this one, rather
        # than replacing the snapshot this release is publishing
        store = ReleaseStore(db, loaded)
        with store.session():
            with showing_steps() as steps:
                row = run_release(spec, db, frame, attributes=names, progress=steps)
            if row["outcome"] == "unchanged":
                console.print(f"unchanged: {snapshot} holds the rows of release {row['release_id']}, the last one "
                              f"published to {db}; release {row['release_id']} stands and nothing was published",
                              highlight=False, soft_wrap=True)
                return
            delta = release_changes(store, row["release_id"])
    table = Table(title=f"release {row['release_id']} published to {db}")
    for column in ("model", "rows (incl. counterfeits)", "groups", "counterfeits", "inserts", "deletes", "updates",
                   "LM"):
        table.add_column(column, justify="left" if column == "model" else "right")
    table.add_row(row["model"], *(str(v) for v in (row["rows"], row["groups"], row["counterfeits"],
                                                      delta["inserts"], delta["deletes"], delta["updates"])),
                  figure_text(row["utility"].get("lm")))
    console.print(table)
    console.print(_checks_line(row["checks"]))


@app.command()
def preview(
    spec: SpecPath,
    db: DbPath,
    snapshot: SnapshotPath,
    attributes: AttributesOption = None,
) -> None:
    """Show what releasing SNAPSHOT would publish, or why it would be refused, without publishing anything.

    Counts, utility and the judge's verdicts are shown. The release is made on a throw-away copy of the store, and DB is left as it was, so the
    next release is never blocked by a preview. Exit 0 when the release would be published (or SNAPSHOT holds the
    rows of the last release: "unchanged"); exit 1 with the reason in one line when it would be refused, as
    `privrelease release` would. The Great Expectations suite of the Dagster release is not run."""
    from .pipeline import preview as preview_release

    names = [a.strip() for a in attributes.split(",") if a.strip()] if attributes else None
    with refusals(db):
        loaded = load_spec(spec)
        outcome = preview_release(ReleaseStore(db, loaded), read_snapshot(snapshot, loaded), names)
    release_id = outcome["release_id"]
    if outcome["outcome"] == "unchanged":
        console.print(f"unchanged: {snapshot} holds the rows of release {release_id}, the last one published to "
                      f"{db}; releasing it would publish nothing", highlight=False, soft_wrap=True)
        return
    if outcome["outcome"] == "refused":
        errors.print(f"[bold red]refused:[/] {outcome['reason']} (preview: nothing was written to {db})",
                     highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    console.print(f"preview: release {release_id} would be published to {db} (nothing was written)",
                  highlight=False, soft_wrap=True)
    table = Table(title=f"release {release_id} (preview)")
    for column in ("model", "rows (incl. counterfeits)", "groups", "counterfeits", "inserts", "deletes", "updates",
                   "LM", "NCP", "query error"):
        table.add_column(column, justify="left" if column == "model" else "right")
    utility = outcome["utility"]
    table.add_row(outcome["model"], *(str(outcome[k]) for k in ("rows", "groups", "counterfeits", "inserts",
                                                                  "deletes", "updates")),
                  *(figure_text(utility.get(k)) for k in ("lm", "ncp", "query_error")))
    console.print(table)
    _reports_table(f"the judge's verdicts on release {release_id}", outcome["reports"])


@app.command()
def record(
    spec: SpecPath,
    db: DbPath,
    snapshot: Annotated[Path, typer.Option("--snapshot", help="the table as it was when the release was published "
                                                            "(every column of the spec), CSV or Parquet")],
    attributes: Annotated[str, typer.Option(help="comma-separated columns that release published (quasi-identifiers, "
                                                 "non-identifiers, the sensitive column)")],
) -> None:
    """Record a release published before this tool, as it was.

    The projection of SNAPSHOT on ATTRIBUTES, ungeneralised, becomes the next release, marked in the manifest as
    protected by no model (model "recorded"). No model and no judge run. Later releases of a model that reads
    every earlier release (e.g. xy_privacy) are judged against it."""
    from .pipeline import record_published

    names = [a.strip() for a in attributes.split(",") if a.strip()]
    with refusals(db):
        loaded = load_spec(spec)
        row = record_published(ReleaseStore(db, loaded), read_snapshot(snapshot, loaded), names)
    if row["outcome"] == "unchanged":
        console.print(f"unchanged: release {row['release_id']} of {db} already records {snapshot} on "
                      f"{', '.join(names)}; nothing was recorded", highlight=False, soft_wrap=True)
        return
    console.print(f"release {row['release_id']} recorded as published, not protected by any model: {row['rows']} "
                  f"rows of {', '.join(row['attributes'])}, ungeneralised, in {db} (no model and no judge ran; the "
                  "later releases are judged against it)", highlight=False, soft_wrap=True)


@app.command()
def show(
    db: DbPath,
    spec: Annotated[
        Path | None, typer.Option("--spec", help="the release spec; when given, the store is checked against it")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="every field of every release, in full, as JSON (for programs)")
    ] = False,
) -> None:
    """The manifest: one line per published release.

    Long parameters (e.g. m-Distinct's update sets) are summarised by their size and the checks counted; --json
    prints every field in full."""
    with refusals(db):
        if spec is not None:
            manifest = existing_store(db, load_spec(spec)).manifest()
        else:
            manifest = read_manifest(db)
    if as_json:
        rows = [{**row, "created_at": row["created_at"].isoformat()} for row in manifest.to_dict(orient="records")]
        sys.stdout.write(json.dumps(rows, indent=2, default=_plain) + "\n")
        return
    rows = [[str(row.release_id), row.model, _params_text(row.params), ", ".join(row.attributes),
             f"{row.created_at:%Y-%m-%d %H:%M}", str(row.rows), _groups_text(row.groups, row.rows),
             str(row.counterfeits), _checks_text(row.checks), figure_text(row.utility.get("lm"))]
            for row in manifest.itertuples()]
    columns = ("release", "model", "params", "attributes", "created (UTC)", "rows", "groups", "counterfeits",
               "checks", "LM")
    widths = [max([len(column), *(len(r[i]) for r in rows)]) for i, column in enumerate(columns)]
    # params and attributes share what the others leave of the line (3 characters of rule and padding a column),
    # cut with an ellipsis: a release stays on one line
    room = (console.width - 3 * len(columns) - 1 - sum(w for c, w in zip(columns, widths, strict=True)
                                                        if c not in ("params", "attributes"))) // 2
    table = Table(title=f"{db}: {len(manifest)} release(s)")
    for column, width in zip(columns, widths, strict=True):
        shrinks = column in ("params", "attributes")
        table.add_column(column, justify="right" if column in ("release", "rows", "groups", "counterfeits", "LM")
                         else "left", no_wrap=True, overflow="ellipsis",
                         width=min(width, max(room, 12)) if shrinks else width)
    for cells in rows:
        table.add_row(*cells)
    console.print(table)


def _plain(value: object) -> object:
    """A value ``json`` cannot write (a numpy scalar or array, a tuple) as the plain value it stands for."""
    return value.tolist() if isinstance(value, np.ndarray | np.generic) else str(value)


def _groups_text(groups: int, rows: int) -> str:
    """The groups of a release, "-" for a release of rows in no group (a per-tuple model, a recorded release)."""
    return "-" if groups == 0 and rows > 0 else str(groups)


@app.command()
def verify(spec: SpecPath, db: DbPath) -> None:
    """Check the model's guarantee over the whole published history; exit 1 when it is broken.

    The history is judged with the model and parameters its last release was published with (the manifest's);
    a spec whose model or parameters differ is refused, naming them."""
    from .core.judge.run import verify_history

    with refusals(db):
        history = judged_store(db, load_spec(spec)).history()
        reports = verify_history(history)
    _verdict(f"guarantees over releases {_span(history.release_ids)}", reports)


@app.command()
def attack(
    spec: SpecPath,
    db: DbPath,
    name: Annotated[str | None, typer.Option("--attack", help="run only this attack (default: all)")] = None,
) -> None:
    """Attack the published history as an adversary would; exit 1 when an attack discloses.

    Each attack is measured against the bound of the model and parameters the last release was published with
    (the manifest's; a spec that differs is refused, naming them). The "found" column says what the count is:
    individuals below the bound, or linked pairs that disclose nothing beside the disclosing links."""
    from .core.judge import attack_registry
    from .core.judge.run import attack_history

    if name is not None and attack_registry.find(name) is None:
        raise typer.BadParameter(f"unknown attack {name!r}; the attacks are {', '.join(attack_registry.names())}",
                                 param_hint="--attack")
    with refusals(db):
        history = judged_store(db, load_spec(spec)).history()
        reports = attack_history(history, [name] if name else None)
    _verdict(f"attacks on releases {_span(history.release_ids)}", reports)


@app.command()
def discard(
    spec: SpecPath,
    db: DbPath,
    release_id: Annotated[int, typer.Option("--release", help="the unpublished release to drop (and any later one)")],
) -> None:
    """Drop a staged release that was never published, so it can be staged again from new rows.

    Never needed after a refusal (the next release replaces the refused snapshot); kept to drop one by hand."""
    with refusals(db):
        existing_store(db, load_spec(spec)).discard(release_id)
    console.print(f"discarded the staged release {release_id} (and any later one) from {db}")


@app.command("change-feed")
def change_feed(
    dsn: Annotated[str, typer.Option("--dsn", envvar="PRIVRELEASE_DSN", show_envvar=False,
                                     help="libpq URI or connection string of the source database (or "
                                     "$PRIVRELEASE_DSN, which keeps a password off the command line)")],
    table: Annotated[str, typer.Option("--table", help="the PostgreSQL source table, schema.table")],
    feed_schema: Annotated[str, typer.Option("--feed-schema", help="the schema of the feed's tables")] = "privrelease",
) -> None:
    """Install the change feed of a PostgreSQL source table (triggers filling a change log).

    The table's rows become the feed's position 1. Re-running it changes nothing."""
    from .orchestration.postgres_source import PostgresTableSource

    with refusals():
        position = PostgresTableSource(dsn=dsn, table=table, feed_schema=feed_schema).install_change_feed()
    console.print(f"the change feed of {table} is in place (schema {feed_schema}); its position is {position}")


@app.command()
def export(
    db: DbPath,
    to: Annotated[Path | None, typer.Option("--to", help="the folder the Parquet files are written to")] = None,
    release_ids: Annotated[list[int] | None, typer.Option("--release", help="a published release to export "
                                                          "(repeat for several; default: every one)")] = None,
    postgres: Annotated[str | None, typer.Option(
        "--postgres", envvar="PRIVRELEASE_POSTGRES", show_default=False,
        help="also export into this PostgreSQL database (a postgresql:// URI; better given in the environment "
             "variable, so the password is not on the command line)")] = None,
    schema: Annotated[str, typer.Option("--schema", help="the PostgreSQL schema exported to")] = "privrelease",
) -> None:
    """Export published releases as Parquet under TO, partitioned by release, or into PostgreSQL.

    The folders release/, counterfeit/, manifest/ and verdict/ hold one release_id=N folder each, beside domain/;
    DuckDB, pandas or Spark read them without this package. --postgres writes the same tables into a PostgreSQL
    schema. Exporting a release again replaces it. Nothing of the private schema is exported."""
    from .export import export_postgres, export_store

    if to is None and postgres is None:
        raise typer.BadParameter("name where to export: --to DIR, --postgres URI, or both", param_hint="--to")
    with refusals(db):
        written = export_store(db, to, release_ids or None) if to is not None else None
        copied = export_postgres(db, postgres, schema, release_ids or None) if postgres is not None else None
    if written is not None:
        console.print(f"exported release(s) {', '.join(map(str, written))} of {db} to {to} (release/, counterfeit/, "
                      "manifest/, verdict/ by release_id=N, and domain/)" if written else
                      f"{db} has no published release; nothing exported", highlight=False, soft_wrap=True)
    if copied is not None:
        console.print(f"exported release(s) {', '.join(map(str, copied)) or 'none'} of {db} to PostgreSQL schema "
                      f"{schema} (tables release, counterfeit, manifest, verdict, domain)", highlight=False,
                      soft_wrap=True)


@app.command()
def report(
    spec: SpecPath,
    db: DbPath,
    release_id: Annotated[int, typer.Option("--release", help="the published release to certify")],
    output: Annotated[Path, typer.Option("-o", "--output", help="the HTML file to write (replaced if it exists)")],
) -> None:
    """Write the release certificate of a published release as one self-contained HTML page.

    It holds the guarantee in plain words, the parameters, each verifier and attack with its verdict and counts,
    utility over the history, counterfeits and group sizes, read from the published tables alone; it names
    nobody."""
    from .orchestration.certificate import write_certificate

    with refusals(db):
        path = write_certificate(db, release_id, output, load_spec(spec))
    console.print(f"certificate of release {release_id} of {db} written to {path}", highlight=False, soft_wrap=True)


@app.command()
def demo(
    home: Annotated[Path, typer.Option("--home", help="the demo folder (source, release store, Dagster home)")] = Path(
        "demo"),
    releases: Annotated[int | None, typer.Option("--releases", min=1, help="how many releases of the stream to "
                                                 "publish (default: the demo's own)")] = None,
    table: Annotated[DemoTable, typer.Option("--table", help="the demo table, or all of them")] = "adult",
) -> None:
    """Publish a stream of releases of a demo table through the example code location's Dagster definitions.

    Each release is a sensor tick (the source changed, or a release request) and a run of the release job
    (snapshot, model, blocking checks, publication) that the Dagster UI shows. adult and census_kdd: m-invariance
    (m = 4) under deletes, inserts and updates; census_kdd_m_distinct: m-Distinct under sensitive updates;
    adult_requests: sequential l-diversity, each release the attributes of a request; adult_xy: (X,Y)-privacy,
    the requests taking two projections of one table in turn. A table starts over: its
    earlier demo under HOME is replaced; the other tables' are kept."""
    from .demo import DEMOS, ROOT

    names = list(DEMOS) if table == "all" else [table]
    home = home.resolve()
    done = [_demo(name, releases or DEMOS[name].releases, home) for name in names]
    if len(done) > 1:
        _demos_summary(done)
    bin_dir = Path(sys.executable).parent  # the commands printed below work as printed, from any folder
    console.print(f"open the UI on it: cd {ROOT} && DAGSTER_HOME={home / '.dagster'} PRIVRELEASE_HOME={home} "
                  f"{bin_dir / 'dagster'} dev -w workspace.yaml", highlight=False, soft_wrap=True)
    for name in names:
        db = DEMOS[name].folder(home) / "releases.duckdb"
        console.print(f"judge {name} again: {bin_dir / 'privrelease'} attack --spec {DEMOS[name].spec} --db {db}",
                      highlight=False, soft_wrap=True)


def _demo(name: str, releases: int, home: Path) -> tuple[str, Any, float]:
    """Run demo ``name`` (``demo.run_demo``) with a line per release and its table; return its name, manifest and
    time in seconds. Exits 1 with the reason when a release is refused."""
    from .demo import DEMOS, run_demo

    steps = []

    def released(i: int, counts: dict, bar: Progress, task) -> None:
        steps.append(counts)
        bar.update(task, completed=i, description=f"{name}: release {i}")
        # a line per release, also when the output is a file or a pipe (make demo | tee), where no bar is drawn
        bar.console.print(f"{name}: release {i} of {releases} published (source: {counts['inserts']} inserted, "
                          f"{counts['deletes']} deleted, {counts['updates']} updated)", highlight=False)

    started = time.perf_counter()
    with refusals(), progress() as bar:
        task = bar.add_task(f"{name}: fetching the data (first use) and releasing", total=releases)
        manifest, _ = run_demo(name, releases, home, on_release=lambda i, counts: released(i, counts, bar, task))
    _demo_table(manifest, steps, load_spec(DEMOS[name].spec))
    console.print(f"release store (DuckDB): [bold]{DEMOS[name].folder(home) / 'releases.duckdb'}[/]", soft_wrap=True)
    return name, manifest, time.perf_counter() - started


def _demos_summary(done: Sequence[tuple[str, Any, float]]) -> None:
    """One line per demo table: its model and parameters, releases, last release's rows, checks, time."""
    table = Table(title=f"{len(done)} demo tables published through Dagster in {sum(t for *_, t in done):.0f} s")
    for column in ("table", "model", "params", "releases", "rows (last)", "checks (last)", "time (s)"):
        table.add_column(column, justify="right" if column in ("releases", "rows (last)", "time (s)") else "left",
                         no_wrap=True, overflow="ellipsis", max_width=48 if column == "params" else None)
    for name, manifest, seconds in done:
        last = manifest.iloc[-1]
        table.add_row(name, last["model"], _params_text(last["params"]), str(len(manifest)), str(last["rows"]),
                      _checks_text(last["checks"]), f"{seconds:.0f}")
    console.print(table)


def _demo_table(manifest, steps: Sequence[dict], spec: Spec) -> None:
    table = Table(title=f"{spec.name}: {spec.model.name} ({_params_text(spec.model.params)}), published through "
                  "Dagster")
    for column in ("release", "rows (incl. counterfeits)", "inserts", "deletes", "updates", "groups", "counterfeits",
                   "LM", "NCP", "query error", "checks"):
        table.add_column(column, justify="left" if column == "checks" else "right")
    for row, step in zip(manifest.itertuples(), steps, strict=False):
        table.add_row(str(row.release_id), str(row.rows), str(step["inserts"]), str(step["deletes"]),
                      str(step["updates"]), _groups_text(row.groups, row.rows), str(row.counterfeits),
                      figure_text(row.utility.get("lm")), figure_text(row.utility.get("ncp")),
                      figure_text(row.utility.get("query_error")), _checks_text(row.checks))
    console.print(table)


def _params_text(params: dict) -> str:
    """A model's parameters on one line, each long one by its size (``_param_text``)."""
    return ", ".join(f"{k}={_param_text(v)}" for k, v in params.items())


def _param_text(value: object) -> str:
    """A model parameter as a title shows it: a mapping or a list by its size (m-Distinct's 46 update sets would
    fill the screen)."""
    if isinstance(value, dict):
        return f"{len(value)} entries"
    if isinstance(value, list | tuple) and len(value) > 4:
        return f"{len(value)} items"
    return str(value)


def _verdict(title: str, reports: Sequence[Report]) -> None:
    """Print ``reports`` as a table; exit with status 1 when any of them failed."""
    _reports_table(title, reports)
    if not all(r.ok for r in reports):
        raise typer.Exit(1)


def _reports_table(title: str, reports: Sequence[Report]) -> None:
    table = Table(title=title)
    for column in ("check", "result", "found", "summary"):
        table.add_column(column, max_width=36 if column == "found" else None)
    for r in reports:
        if r.summary.get("skipped"):
            table.add_row(r.name, "[yellow]skipped[/]", "-", str(r.summary["skipped"]))
            continue
        summary = ", ".join(f"{k}={figure_text(v) if isinstance(v, float) else v}" for k, v in r.summary.items())
        table.add_row(r.name, "[green]holds[/]" if r.ok else "[red]broken[/]", _found_text(r), summary)
    console.print(table)


def _found_text(report: Report) -> str:
    """What ``report`` found, counted and named: by kind when its violations say (a ``kind`` column: the
    equivalence attack's linked pairs, most of which disclose nothing, and its disclosing links); else a
    verifier's violations, or an attack's individuals below its bound (``below_bound``), those already disclosed
    by a release recorded before the tool (``predating``) said so, and rows of a report that holds said to break
    nothing."""
    frame = report.violations
    n = 0 if frame is None else len(frame)
    if frame is not None and n and "kind" in frame.columns:
        return ", ".join(f"{count:,} {kind}" for kind, count in frame["kind"].value_counts(sort=False).items())
    if "bound" not in report.summary:  # a verifier's
        return f"{n:,} violation(s)" if n else "no violation"
    below = int(report.summary.get("below_bound", n))
    predating = int(report.summary.get("predating", 0))
    if not below:
        return "nobody below the bound"
    if predating:
        return f"{below:,} below the bound, {predating:,} of them disclosed by a recorded release"
    return f"{below:,} below the bound" + (", none breaking the guarantee" if report.ok else "")


def _checks_text(checks: dict) -> str:
    failed = sorted(k for k, ok in checks.items() if not ok)
    return f"{len(checks) - len(failed)}/{len(checks)} pass" + (f", failed: {', '.join(failed)}" if failed else "")


def _checks_line(checks: dict) -> str:
    return "checks: " + ", ".join(f"{k} {'[green]ok[/]' if ok else '[red]failed[/]'}" for k, ok in checks.items())


def _span(ids: Sequence[int]) -> str:
    return f"{ids[0]}..{ids[-1]}" if ids else "none"
