"""Sensors that turn changes and requests into releases: each adds a dynamic partition and requests a run.

- ``<table>_source_changed`` fingerprints the source (row count and a hash of every row's id and values,
  computed by DuckDB; for a change log, its highest position) and, when the fingerprint moved since the last
  tick (rows inserted, deleted or updated), adds the next partition key and requests a release run. The cursor
  is the last fingerprint. On its very first tick it requests the first release when there is none yet, and
  otherwise only records the fingerprint.
- ``<table>_release_requests`` reads a drop folder of YAML files, one release request each
  (``attributes: [age, sex]``; omitted: every quasi-identifier). The vertical models (sequential ℓ-diversity,
  (X,Y)-privacy) publish a different attribute subset per release; the other models publish every
  quasi-identifier, so for them a request that names a strict subset is refused with a logged reason. An
  accepted request becomes a partition and a run tagged ``privrelease/attributes``. One request per tick, in
  file-name order; the cursor lists the files handled.
"""


import json
from pathlib import Path

import dagster as dg
import yaml
from dagster import SensorEvaluationContext

from ..core import models
from ..core.spec import Spec
from ..errors import StoreError

TAG = "privrelease/table"
ATTRIBUTES_TAG = "privrelease/attributes"


def source_sensor(table: str, partitions: dg.DynamicPartitionsDefinition, keys, job) -> dg.SensorDefinition:
    """The sensor that releases ``table`` when its source changed."""

    @dg.sensor(
        name=f"{table}_source_changed",
        target=job,
        required_resource_keys={keys.source, keys.store},
        minimum_interval_seconds=15,
        description=f"Adds a release of {table} when rows of its source were inserted, deleted or updated.",
    )
    def sensor(context: SensorEvaluationContext):
        source = getattr(context.resources, keys.source)
        spec = getattr(context.resources, keys.store).loaded_spec()
        try:
            fingerprint = source.fingerprint(spec)
        except StoreError as exc:
            return dg.SkipReason(f"{table}: {exc}")
        cursor = json.dumps(fingerprint.as_cursor())
        last = json.loads(context.cursor) if context.cursor else None
        existing = context.instance.get_dynamic_partitions(partitions.name)
        if last == fingerprint.as_cursor():
            return dg.SkipReason(f"{table}: source unchanged ({fingerprint.rows} rows)")
        if fingerprint.rows == 0:
            return dg.SensorResult(cursor=cursor, skip_reason=f"{table}: source is empty")
        if last is None and existing:
            return dg.SensorResult(
                cursor=cursor, skip_reason=f"{table}: first tick, fingerprint recorded ({len(existing)} releases exist)"
            )
        key = source.next_key(existing, fingerprint)
        if key in existing:
            return dg.SensorResult(cursor=cursor, skip_reason=f"{table}: release {key} already exists")
        return _release(partitions, table, key, cursor, {"privrelease/trigger": "source"})

    return sensor


def request_sensor(
    table: str, partitions: dg.DynamicPartitionsDefinition, keys, job, folder: Path
) -> dg.SensorDefinition:
    """The sensor that turns request files in ``folder`` into releases of ``table``."""

    @dg.sensor(
        name=f"{table}_release_requests",
        target=job,
        required_resource_keys={keys.source, keys.store},
        minimum_interval_seconds=15,
        description=f"Turns release requests (YAML files in {folder}) into releases of {table}.",
    )
    def sensor(context: SensorEvaluationContext):
        done = json.loads(context.cursor) if context.cursor else []
        pending = sorted(p.name for p in folder.glob("*.yaml") if p.name not in done) if folder.is_dir() else []
        if not pending:
            return dg.SkipReason(f"{table}: no new request in {folder}")
        name = pending[0]
        cursor = json.dumps([*done, name])
        spec = getattr(context.resources, keys.store).loaded_spec()
        try:
            attributes = read_request(folder / name, spec)
        except ValueError as exc:
            context.log.warning(str(exc))
            return dg.SensorResult(cursor=cursor, skip_reason=str(exc))
        source = getattr(context.resources, keys.source)
        existing = context.instance.get_dynamic_partitions(partitions.name)
        key = source.next_key(existing, source.fingerprint(spec))
        if key in existing:
            return dg.SensorResult(cursor=cursor, skip_reason=f"{table}: request {name}: release {key} already exists")
        tags = {"privrelease/trigger": "request", "privrelease/request": name, ATTRIBUTES_TAG: ",".join(attributes)}
        return _release(partitions, table, key, cursor, tags)

    return sensor


def read_request(path: Path, spec: Spec) -> tuple[str, ...]:
    """The attributes a request file asks for (``attributes: [...]``, default every quasi-identifier).

    Raises ValueError naming the file and the rule: not YAML, unknown key or attribute, or a strict subset for
    a model that publishes every quasi-identifier.
    """
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"request {path.name}: not valid YAML ({exc})") from exc
    if not isinstance(raw, dict) or set(raw) - {"attributes", "note"}:
        raise ValueError(f"request {path.name}: expected a mapping with keys 'attributes' and optional 'note'")
    attributes = raw.get("attributes") or list(spec.quasi_identifiers)
    unknown = [a for a in attributes if a not in spec.quasi_identifiers]
    if unknown:
        raise ValueError(
            f"request {path.name}: attribute(s) {unknown} are not quasi-identifiers of {spec.name} "
            f"({list(spec.quasi_identifiers)})"
        )
    ordered = tuple(a for a in spec.quasi_identifiers if a in attributes)
    if not models.descriptor(spec.model.name).vertical and ordered != tuple(spec.quasi_identifiers):
        vertical = [n for n in models.names() if models.descriptor(n).vertical]
        raise ValueError(
            f"request {path.name}: model {spec.model.name} publishes every quasi-identifier; the subset "
            f"{list(ordered)} needs a vertical model ({vertical})"
        )
    return ordered


def _release(partitions, table: str, key: str, cursor: str, tags: dict) -> dg.SensorResult:
    return dg.SensorResult(
        run_requests=[dg.RunRequest(partition_key=key, run_key=key, tags={TAG: table, **tags})],
        dynamic_partitions_requests=[partitions.build_add_request([key])],
        cursor=cursor,
    )


def tick(defs: dg.Definitions, instance: dg.DagsterInstance, sensor: str, cursor: str | None):
    """One tick of ``sensor`` as the daemon evaluates it (``evaluate_tick``), its partition requests applied to
    ``instance``. Returns the tick's data: the caller launches its ``run_requests`` and passes its ``cursor`` on."""
    # entered and left like the daemon does: the context's own instance must not outlive the tick
    with dg.build_sensor_context(
        instance_ref=instance.get_ref(), cursor=cursor, definitions=defs, resources=defs.resources
    ) as context:
        data = defs.resolve_sensor_def(sensor).evaluate_tick(context)
    for request in data.dynamic_partitions_requests:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return data
