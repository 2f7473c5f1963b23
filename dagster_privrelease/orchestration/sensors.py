"""Sensors that turn changes and requests into releases: each adds a dynamic partition and requests a run.

- ``<table>_source_changed`` fingerprints the source (``Source.fingerprint``: for a table, its row count and a
  hash of every row's id and values, computed by DuckDB; for a change log, its highest position) and, when the
  fingerprint moved since the last tick (rows inserted, deleted or updated), adds the next partition key and
  requests a release run. The cursor is the last fingerprint; its first tick (no cursor) treats the source as
  moved. A source that holds exactly the rows of the last published release (``pipeline.unchanged``, the CLI's
  test) requests nothing, and the unpublished partitions are retired (deleted): so a source restored after a
  refusal, or a sensor turned on after releases made without it, never publishes a copy, while a change made
  before the sensor was turned on is published. Releases published without a partition (``privrelease
  release``, ``run_release`` on an instance of its own) get theirs (``partitions.missing_keys``), so the next
  key follows them.
- Refusals never block (``next_release``): while the last partition's release is unpublished (its run was
  refused: a bad snapshot, a model that cannot publish, a failed blocking check), a change of the source
  re-requests that same partition, under a new run key, rather than opening one after it; its snapshot is
  re-captured from the fixed source. A change log's unpublished partition whose position is not the log's
  current one is deleted and the current position added, so the release is rebuilt from the fixed log. While a
  run of that partition is queued or running, the tick waits (its cursor does not move).
- ``<table>_release_requests`` reads a drop folder of YAML files, one release request each
  (``attributes: [age, sex]``; omitted: every quasi-identifier). The vertical models (sequential ℓ-diversity,
  (X,Y)-privacy) publish a different attribute subset per release; the other models publish every
  quasi-identifier, so for them a request that names a strict subset is refused with a logged reason. An
  accepted request becomes a partition and a run tagged ``privrelease/attributes``. One request per tick, in
  file-name order; the cursor lists the files handled.

Each tick logs what it did (``explained``): the release it requested and why, or why it requested none, in the
tick's log that the UI shows on the sensor's page.
"""


import json
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
from dagster import SensorEvaluationContext
from dagster._core.definitions.repository_definition import SINGLETON_REPOSITORY_NAME

from .. import pipeline
from ..core.spec import Spec
from ..core.yamlfile import read_yaml
from ..errors import PrivReleaseError, SpecError, StoreError
from .partitions import missing_keys
from .sources import Fingerprint
from .translator import ReleaseTable

TAG = "privrelease/table"
ATTRIBUTES_TAG = "privrelease/attributes"


#: Run statuses of a run that may still publish its release.
ACTIVE = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING,
          dg.DagsterRunStatus.STARTED]


@dataclass(frozen=True)
class Hold:
    """Why a tick requests no run: ``waits`` when the same change must be looked at again on a later tick (the
    cursor does not move), else the change needs no release."""

    reason: str
    waits: bool

    def result(self, cursor: str) -> dg.SkipReason | dg.SensorResult:
        """The tick's result: a skip that keeps the cursor when it waits, one that moves it to ``cursor`` else."""
        return dg.SkipReason(self.reason) if self.waits else dg.SensorResult(cursor=cursor, skip_reason=self.reason)


@dataclass(frozen=True)
class Plan:
    """Where the next release goes: partition ``key``; the ``published`` count; the partitions of published
    releases that have none yet (``missing``: releases made outside the sensors, ``partitions.missing_keys``),
    and the unpublished ones (``pending``: left by a refused or empty run)."""

    key: str
    published: int
    missing: list[str]
    pending: list[str]

    def run_requests(self, release: ReleaseTable) -> list:
        """The partition requests of a run of ``key``: the missing keys and ``key`` added, the other pending keys
        deleted (a change log's refused position)."""
        stale = [k for k in self.pending if k != self.key]
        return [*([release.partitions.build_delete_request(stale)] if stale else []),
                release.partitions.build_add_request([*self.missing, self.key])]

    def retire_requests(self, release: ReleaseTable) -> list:
        """The partition requests when nothing is to be published: the missing keys added, every pending one
        deleted, so none is ever published as a copy of the last release."""
        return [*([release.partitions.build_delete_request(self.pending)] if self.pending else []),
                *([release.partitions.build_add_request(self.missing)] if self.missing else [])]


def next_release(
    release: ReleaseTable, context: SensorEvaluationContext, source, fingerprint: Fingerprint
) -> Plan | Hold:
    """Where the next release run goes (``Plan``): the partition key to run is the source's ``next_key`` after the
    published releases' keys (a new key, or the key of the last release when it is unpublished); or a ``Hold``:
    waiting while a run of an unpublished partition is queued or running or the store is locked, nothing to do
    when the key is a published release's. The published releases are counted in the store, read-only; the
    first of the table's keys are theirs, in order, the keys they lack added after the highest."""
    table = release.name
    existing = sorted(context.instance.get_dynamic_partitions(release.partitions_name))
    try:
        published = getattr(context.resources, release.store).published_ids()
    except StoreError as exc:
        return Hold(f"{table}: {exc}", waits=True)
    missing = missing_keys(existing, len(published))
    keys = sorted([*existing, *missing])
    done, pending = keys[: len(published)], keys[len(published):]
    key = source.next_key(done, fingerprint)
    if key in done:
        return Hold(f"{table}: release {key} already exists", waits=False)
    for waiting in pending:
        runs = context.instance.get_runs(
            dg.RunsFilter(tags={TAG: table, "dagster/partition": waiting}, statuses=ACTIVE), limit=1
        )
        if runs:
            status = runs[0].status.value.lower()
            return Hold(f"{table}: release {waiting} is still {status}; the change waits for its run", waits=True)
    return Plan(key, len(published), missing, pending)


def published_copy(release: ReleaseTable, context: SensorEvaluationContext, source, plan: Plan) -> int | Hold | None:
    """The last published release when the source, read at ``plan.key``, holds exactly its rows
    (``pipeline.unchanged``, the CLI's test): publishing it again would add a copy. None when it differs, when
    nothing is published yet (the store is not opened then), or when the spec refuses the rows (the run then
    refuses them, naming the reason); a waiting ``Hold`` when the store cannot be read."""
    if not plan.published:
        return None
    resource = getattr(context.resources, release.store)
    try:
        rows = source.read(resource.loaded_spec(), position=int(plan.key))
        return pipeline.unchanged(resource.store(), rows)
    except StoreError as exc:
        return Hold(f"{release.name}: {exc}", waits=True)
    except PrivReleaseError:
        return None


def source_sensor(release: ReleaseTable, job) -> dg.SensorDefinition:
    """The sensor that releases ``release``'s table when its source changed."""
    table = release.name

    @dg.sensor(
        name=f"{table}_source_changed",
        target=job,
        required_resource_keys={release.source, release.store},
        minimum_interval_seconds=15,
        description=f"Adds a release of {table} when rows of its source were inserted, deleted or updated.",
    )
    def sensor(context: SensorEvaluationContext):
        return explained(context, evaluate(context))

    def evaluate(context: SensorEvaluationContext) -> dg.SkipReason | dg.SensorResult:
        source = getattr(context.resources, release.source)
        spec = getattr(context.resources, release.store).loaded_spec()
        try:
            fingerprint = source.fingerprint(spec)
        except StoreError as exc:
            return dg.SkipReason(f"{table}: {exc}")
        cursor = json.dumps(fingerprint.as_cursor())
        last = json.loads(context.cursor) if context.cursor else None
        if last == fingerprint.as_cursor():
            return dg.SkipReason(f"{table}: source unchanged ({fingerprint.rows} rows)")
        if fingerprint.rows == 0:
            return dg.SensorResult(cursor=cursor, skip_reason=f"{table}: source is empty")
        plan = next_release(release, context, source, fingerprint)
        if isinstance(plan, Hold):
            return plan.result(cursor)
        copy = published_copy(release, context, source, plan)
        if isinstance(copy, Hold):
            return copy.result(cursor)
        if copy is not None:
            retired = f"; unpublished partition(s) {plan.pending} retired" if plan.pending else ""
            return dg.SensorResult(
                cursor=cursor, dynamic_partitions_requests=plan.retire_requests(release),
                skip_reason=f"{table}: the source holds exactly the rows of release {copy}, the last published; "
                f"nothing to publish{retired}",
            )
        return _release(release, plan, cursor, f"{plan.key}:{fingerprint.digest}", {"privrelease/trigger": "source"})

    return sensor


def request_sensor(release: ReleaseTable, job, folder: Path) -> dg.SensorDefinition:
    """The sensor that turns request files in ``folder`` into releases of ``release``'s table."""
    table = release.name

    @dg.sensor(
        name=f"{table}_release_requests",
        target=job,
        required_resource_keys={release.source, release.store},
        minimum_interval_seconds=15,
        description=f"Turns release requests (YAML files in {folder}) into releases of {table}.",
    )
    def sensor(context: SensorEvaluationContext):
        return explained(context, evaluate(context))

    def evaluate(context: SensorEvaluationContext) -> dg.SkipReason | dg.SensorResult:
        done = json.loads(context.cursor) if context.cursor else []
        pending = sorted(p.name for p in folder.glob("*.yaml") if p.name not in done) if folder.is_dir() else []
        if not pending:
            return dg.SkipReason(f"{table}: no new request in {folder}")
        name = pending[0]
        cursor = json.dumps([*done, name])
        spec = getattr(context.resources, release.store).loaded_spec()
        try:
            attributes = read_request(folder / name, spec)
        except ValueError as exc:
            return dg.SensorResult(cursor=cursor, skip_reason=str(exc))
        source = getattr(context.resources, release.source)
        plan = next_release(release, context, source, source.fingerprint(spec))
        if isinstance(plan, Hold):
            return Hold(f"request {name}: {plan.reason}", plan.waits).result(cursor)
        tags = {"privrelease/trigger": "request", "privrelease/request": name, ATTRIBUTES_TAG: ",".join(attributes)}
        return _release(release, plan, cursor, f"{plan.key}:{name}", tags)

    return sensor


def read_request(path: Path, spec: Spec) -> tuple[str, ...]:
    """The attributes a request file asks for (``attributes: [...]``, default every quasi-identifier).

    Raises ValueError naming the file and the rule: not YAML (``core.yamlfile.read_yaml``), an unknown key, or
    attributes ``pipeline.model_spec`` refuses (not quasi-identifiers, or a strict subset for a model that publishes every quasi-identifier: the
    same check as the library's and the CLI's).
    """
    try:
        raw = read_yaml(path, "request") or {}
    except SpecError as exc:
        raise ValueError(f"request {exc}") from exc  # "request <file>: <rule>"
    if not isinstance(raw, dict) or set(raw) - {"attributes", "note"}:
        raise ValueError(f"request {path.name}: expected a mapping with keys 'attributes' and optional 'note'")
    try:
        return tuple(pipeline.model_spec(spec, raw.get("attributes")).quasi_identifiers)
    except SpecError as exc:
        raise ValueError(f"request {path.name}: {exc}") from exc


def explained(context: SensorEvaluationContext, result: dg.SkipReason | dg.SensorResult):
    """``result`` of a tick, after logging what it does to the tick's log (``context.log``, the log the UI shows on
    the sensor's tick): the release it requests (partition, what triggered it, the attributes of a request) or
    why it requests none (the skip reason). Names, keys and counts only."""
    if isinstance(result, dg.SkipReason):
        context.log.info(f"skipped: {result.skip_message}")
        return result
    for request in result.run_requests or []:
        tags = request.tags
        why = f"request {tags['privrelease/request']}" if "privrelease/request" in tags else "the source changed"
        attributes = f", attributes {tags[ATTRIBUTES_TAG].replace(',', ', ')}" if ATTRIBUTES_TAG in tags else ""
        context.log.info(f"requested release {request.partition_key} of {tags[TAG]} ({why}{attributes})")
    if not result.run_requests:
        context.log.info(f"skipped: {result.skip_reason.skip_message if result.skip_reason else 'nothing to do'}")
    return result


def _release(release: ReleaseTable, plan: Plan, cursor: str, run_key: str, tags: dict) -> dg.SensorResult:
    """A run of partition ``plan.key`` with its partition requests (``Plan.run_requests``)."""
    return dg.SensorResult(
        run_requests=[dg.RunRequest(partition_key=plan.key, run_key=run_key, tags={TAG: release.name, **tags})],
        dynamic_partitions_requests=plan.run_requests(release),
        cursor=cursor,
    )


def tick(defs: dg.Definitions, instance: dg.DagsterInstance, sensor: str, cursor: str | None):
    """One tick of ``sensor`` as the daemon evaluates it (``evaluate_tick``), its partition requests applied to
    ``instance``. Returns the tick's data: the caller launches its ``run_requests`` and passes its ``cursor`` on;
    its ``log_key`` names what the tick logged in ``instance``'s captured logs (None when it logged nothing)."""
    # entered and left like the daemon does: the context's own instance must not outlive the tick
    with dg.build_sensor_context(
        instance_ref=instance.get_ref(), cursor=cursor, definitions=defs, resources=defs.resources,
        repository_name=SINGLETON_REPOSITORY_NAME, sensor_name=sensor,
    ) as context:
        data = defs.resolve_sensor_def(sensor).evaluate_tick(context)
    for request in data.dynamic_partitions_requests or []:
        keys = list(request.partition_keys or [])
        if isinstance(request, dg.DeleteDynamicPartitionsRequest):
            for key in keys:
                instance.delete_dynamic_partition(request.partitions_def_name, key)
        else:
            instance.add_dynamic_partitions(request.partitions_def_name, keys)
    return data
