"""The release spec: which column is the identifier, which is sensitive, the quasi-identifiers with their
types and taxonomies, the non-identifiers, and the model with its parameters.

A spec is loaded from YAML (``load_spec``) or a mapping (``parse_spec``) and refused at load time with a
``SpecError`` naming the key and the rule. ``validate_snapshot`` checks a table against a spec and returns it
normalised (numeric QIs as float, categoricals as str), raising ``SnapshotError`` naming the column and row.
``bind`` fills the taxonomies the spec leaves out (flat, from the data) and the sensitive domain.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import SnapshotError, SpecError
from .encoding import as_text
from .hierarchy import Taxonomy
from .models.registry import descriptor, find
from .yamlfile import read_yaml


@dataclass(frozen=True)
class QuasiIdentifier:
    """A quasi-identifier: numeric (generalised to intervals of width >= ``min_width``) or categorical
    (generalised to taxonomy nodes; ``taxonomy`` None until ``bind`` gives it the flat one)."""

    name: str
    type: str
    min_width: float = 0.0
    taxonomy: Taxonomy | None = None
    written: bool = False  # taxonomy written in the spec (fixed) rather than flat from the data (grows)

    @property
    def numeric(self) -> bool:
        """Whether the attribute is numeric (generalised to intervals) rather than categorical."""
        return self.type == "numeric"


@dataclass(frozen=True)
class Model:
    """The spec's model: a registered model's name and its validated parameters (defaults filled in)."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)


#: How a CSV snapshot's column may be read (``CsvFormat.types``): text as written, or parsed as a number.
CSV_TYPES = ("text", "integer", "number")


@dataclass(frozen=True)
class CsvFormat:
    """How a CSV snapshot is read (the spec's ``csv`` key; Parquet files and frames keep their own types).

    Every cell is text as written (``007``, ``None``, ``NA`` are values); an empty cell, or one equal to a marker
    in ``missing``, is missing. ``types`` maps a column to one of ``CSV_TYPES``; a column it does not name is
    text, except a numeric quasi-identifier, read as a number (``Spec.csv_type``).
    """

    missing: tuple[str, ...] = ()
    types: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Workload:
    """The workload of the median query error (the spec's ``utility`` key; Xiao-Tao §5.2, ``utility.query_error``):
    ``queries`` random range-count queries over every released quasi-identifier and the sensitive attribute, each
    range ``|A| * selectivity^(1/(d+1))`` long. The expected share of rows a query holds is ``selectivity`` only when
    the attributes are independent; on correlated data (Adult, 7 QIs) 0.1 leaves a median of 26 rows of 30,000 per
    query, so that its relative error measures noise; a larger selectivity gives queries of hundreds of rows."""

    selectivity: float = 0.1
    queries: int = 200


@dataclass(frozen=True)
class Spec:
    """A validated release spec. ``sensitive_values`` is the sensitive domain: written in the spec
    (``sensitive_written``, fixed) or collected from the data by ``bind`` (None until then; grows)."""

    name: str
    id: str
    sensitive: str
    quasi_identifiers: dict[str, QuasiIdentifier]
    model: Model
    non_identifiers: tuple[str, ...] = ()
    sensitive_values: tuple[str, ...] | None = None
    seed: int = 0
    sensitive_written: bool = False
    csv: CsvFormat = field(default_factory=CsvFormat)
    utility: Workload = field(default_factory=Workload)

    @property
    def columns(self) -> list[str]:
        """Every column a snapshot must have: id, quasi-identifiers, non-identifiers, sensitive."""
        return [self.id, *self.quasi_identifiers, *self.non_identifiers, self.sensitive]

    def csv_type(self, column: str) -> str:
        """How ``column`` of a CSV snapshot is read (one of ``CSV_TYPES``): as ``csv.types`` says, else a number
        for a numeric quasi-identifier and text for any other column (the id included)."""
        qi = self.quasi_identifiers.get(column)
        return self.csv.types.get(column, "number" if qi is not None and qi.numeric else "text")

    def bind(self, snapshot: pd.DataFrame) -> BoundSpec:
        """This spec with the flat taxonomies and the sensitive domain extended by ``snapshot``'s values.

        Written taxonomies and a written sensitive domain are kept as they are (``validate_snapshot`` refuses
        values outside them). Flat ones grow by appending unseen values, so earlier ranks stay valid.
        """
        qis = {}
        for name, qi in self.quasi_identifiers.items():
            qis[name] = qi
            if not qi.numeric and not qi.written:
                values = snapshot[name].astype(str).unique()
                tax = Taxonomy.flat(values) if qi.taxonomy is None else qi.taxonomy.extended(values)
                qis[name] = dataclasses.replace(qi, taxonomy=tax)
        sensitive = self.sensitive_values
        if not self.sensitive_written:
            known = list(sensitive or ())
            new = sorted(set(snapshot[self.sensitive].astype(str).unique()) - set(known))
            sensitive = tuple(known + new)
        taxonomies = {name: qi.taxonomy for name, qi in qis.items() if qi.taxonomy is not None}
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(Spec)}
        spec = BoundSpec(**{**fields, "quasi_identifiers": qis, "sensitive_values": tuple(sensitive or ())},
                         taxonomies=taxonomies)
        check_diversity_param(spec)
        return spec


@dataclass(frozen=True)
class BoundSpec(Spec):
    """A spec bound to the data (``Spec.bind``): every categorical quasi-identifier has its taxonomy
    (``taxonomy(name)``) and the sensitive domain is known, so neither is optional. The models, the judge and the
    utility metrics take this type; ``dataclasses.replace`` keeps it (e.g. a spec restricted to the attributes of
    one release)."""

    sensitive_values: tuple[str, ...] = ()
    taxonomies: Mapping[str, Taxonomy] = field(default_factory=dict)

    def taxonomy(self, name: str) -> Taxonomy:
        """The taxonomy of the categorical quasi-identifier ``name`` (KeyError for a numeric one)."""
        return self.taxonomies[name]


def check_diversity_param(spec: Spec) -> None:
    """Refuse an ℓ or m larger than the number of distinct sensitive values (no partition can satisfy it); the
    parameter is the model's ``diversity_param`` (a spec built in code may name a model not registered: no rule)."""
    model = find(spec.model.name)
    key = None if model is None else model.diversity_param
    if key is None or spec.sensitive_values is None:
        return
    value = spec.model.params[key]
    if value > len(spec.sensitive_values):
        raise SpecError(
            f"model.{key}: {key}={value} is larger than the {len(spec.sensitive_values)} distinct values of the "
            f"sensitive column {spec.sensitive!r}; no group can hold {value} different sensitive values"
        )


def load_spec(path: str | Path) -> Spec:
    """Read and validate a YAML spec. Taxonomy files named in it are read relative to the spec's folder."""
    path = Path(path)
    return parse_spec(read_yaml(path, "spec"), base=path.parent)


def parse_spec(raw: Any, base: Path | None = None) -> Spec:
    """Validate a spec given as a mapping (the YAML document); the keys are those of ``docs/spec.md``.

    Args:
        raw: the parsed YAML document.
        base: the folder taxonomy files named in the spec are read relative to (default: the working directory).

    Returns:
        The validated ``Spec``, with the model's parameters checked against its descriptor.

    Raises:
        SpecError: a key is missing, unknown or malformed, or the model or its parameters are refused.
    """
    if not isinstance(raw, Mapping):
        raise SpecError(f"spec: expected a mapping of keys, got {type(raw).__name__}")
    known = {"name", "id", "sensitive", "quasi_identifiers", "non_identifiers", "model", "seed", "csv", "utility"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise SpecError(f"spec: unknown key(s) {unknown}; the keys are {sorted(known)}")
    for key in ("name", "id", "sensitive", "quasi_identifiers", "model"):
        if key not in raw:
            raise SpecError(f"spec: missing required key {key!r}")
    name = _string(raw["name"], "name")
    ident = _string(raw["id"], "id")
    sensitive, sensitive_values = _sensitive(raw["sensitive"])
    qis = _quasi_identifiers(raw["quasi_identifiers"], base)
    non_ids = raw.get("non_identifiers") or []
    if not isinstance(non_ids, list) or not all(isinstance(c, str) for c in non_ids):
        raise SpecError("non_identifiers: expected a list of column names")
    columns = [ident, sensitive, *qis, *non_ids]
    duplicated = sorted({c for c in columns if columns.count(c) > 1})
    if duplicated:
        raise SpecError(f"spec: column(s) {duplicated} have more than one role (id, sensitive, QI, non-identifier)")
    check_names(name, ident, sensitive, list(qis), non_ids)
    seed = raw.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise SpecError(f"seed: expected an integer, got {seed!r}")
    if seed < 0:
        raise SpecError(f"seed: expected an integer >= 0, got {seed!r} (numpy seeds are non-negative)")
    spec = Spec(name, ident, sensitive, qis, _model(raw["model"]), tuple(non_ids), sensitive_values, seed,
                sensitive_written=sensitive_values is not None, csv=_csv(raw.get("csv"), columns, qis),
                utility=_workload(raw.get("utility")))
    check_diversity_param(spec)
    check = descriptor(spec.model.name).check_spec
    if check is not None:
        check(spec)
    return spec


#: What a spec's ``name`` may be: it names the table's Dagster asset group, job, partitions, sensors and
#: resources, whose names are letters, digits and underscores.
NAME = re.compile(r"[A-Za-z0-9_]+")
#: Column names the release store's tables add beside the spec's columns (``storage.schema``, ``storage.write``):
#: ``release_id`` in every table, ``group_id`` in the hosting and release tables, ``archived_at`` and ``seq`` in
#: the judge's archives, and ``<quasi-identifier>__lo``/``__hi`` (``RESERVED_SUFFIXES``) in the release tables.
RESERVED_COLUMNS = ("release_id", "group_id", "archived_at", "seq")
RESERVED_SUFFIXES = ("__lo", "__hi")


def check_names(name: str, ident: str, sensitive: str, qis: list[str], non_ids: list[str]) -> None:
    """Refuse a spec ``name`` that Dagster cannot name things with, and a column name the store cannot keep.

    Rules: ``name`` matches ``NAME``; no column is named as a column the store adds (``RESERVED_COLUMNS``, or a
    name ending in one of ``RESERVED_SUFFIXES``) and no two columns differ only in case: DuckDB, where the store
    keeps them, compares column names without case.

    Raises:
        SpecError: naming the key (``name``, ``id``, ``sensitive``, ``quasi_identifiers.<column>``,
            ``non_identifiers``) and the rule.
    """
    if not NAME.fullmatch(name):
        derived = re.sub(r"[^A-Za-z0-9_]", "_", name)
        raise SpecError(f"name: {name!r} is not a valid table name: it names the Dagster asset group, job and "
                        f"sensors, whose names are letters, digits and underscores (e.g. {derived!r})")
    keyed = [("id", ident), ("sensitive", sensitive), *((f"quasi_identifiers.{q}", q) for q in qis),
             *(("non_identifiers", c) for c in non_ids)]
    for key, column in keyed:
        folded = column.lower()
        if folded in RESERVED_COLUMNS or folded.endswith(RESERVED_SUFFIXES):
            raise SpecError(f"{key}: column {column!r} has a name the release store reserves for its own columns "
                            f"({', '.join(RESERVED_COLUMNS)}, and names ending in {' or '.join(RESERVED_SUFFIXES)}, "
                            "compared without case); rename the column in the source and the spec")
    folded = [column.lower() for _, column in keyed]
    clashes = sorted({column for _, column in keyed if folded.count(column.lower()) > 1})
    if clashes:
        raise SpecError(f"spec: columns {clashes} differ only in case; DuckDB, where the store keeps them, compares "
                        "column names without case: rename one of them")


def _string(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise SpecError(f"{key}: expected a non-empty string, got {value!r}")
    return value


def _sensitive(raw: Any) -> tuple[str, tuple[str, ...] | None]:
    if isinstance(raw, str):
        return _string(raw, "sensitive"), None
    if isinstance(raw, Mapping) and set(raw) <= {"name", "values"} and "name" in raw:
        values = raw.get("values")
        if values is not None and (not isinstance(values, list) or not values):
            raise SpecError("sensitive.values: expected a non-empty list of the sensitive domain")
        text = None if values is None else tuple(str(v) for v in values)
        repeated = sorted({v for v in text if text.count(v) > 1}) if text else []
        if repeated:
            raise SpecError(f"sensitive.values: value(s) {repeated} listed more than once")
        return _string(raw["name"], "sensitive.name"), text
    raise SpecError(f"sensitive: expected a column name or {{name: ..., values: [...]}}, got {raw!r}")


def _workload(raw: Any) -> Workload:
    """The ``utility`` mapping: ``selectivity`` (0 < s <= 1) and ``queries`` (>= 1) of the query-error workload."""
    if raw is None:
        return Workload()
    if not isinstance(raw, Mapping) or not set(raw) <= {"selectivity", "queries"}:
        raise SpecError(f"utility: expected a mapping with the keys 'selectivity' and 'queries', got {raw!r}")
    selectivity, queries = raw.get("selectivity", Workload.selectivity), raw.get("queries", Workload.queries)
    if isinstance(selectivity, bool) or not isinstance(selectivity, int | float) or not 0 < selectivity <= 1:
        raise SpecError(f"utility.selectivity: expected a number in (0, 1], got {selectivity!r}")
    if isinstance(queries, bool) or not isinstance(queries, int) or queries < 1:
        raise SpecError(f"utility.queries: expected an integer >= 1, got {queries!r}")
    return Workload(float(selectivity), queries)


def _csv(raw: Any, columns: list[str], qis: Mapping[str, QuasiIdentifier]) -> CsvFormat:
    """The ``csv`` mapping (``missing``: markers of a missing cell; ``types``: column -> one of ``CSV_TYPES``)."""
    if raw is None:
        return CsvFormat()
    if not isinstance(raw, Mapping) or set(raw) - {"missing", "types"}:
        raise SpecError(f"csv: expected a mapping with the keys 'missing' and 'types', got {raw!r}")
    missing = raw.get("missing") or []
    if not isinstance(missing, list) or not all(isinstance(m, str) and m for m in missing):
        raise SpecError(f"csv.missing: expected a list of non-empty texts that mark a missing cell (quote them: "
                        f"['?', 'NA']), got {missing!r}")
    types = raw.get("types") or {}
    if not isinstance(types, Mapping):
        raise SpecError(f"csv.types: expected a mapping from column to one of {list(CSV_TYPES)}, got {types!r}")
    for column, kind in types.items():
        if column not in columns:
            raise SpecError(f"csv.types.{column}: not a column of the spec (they are {columns})")
        if kind not in CSV_TYPES:
            raise SpecError(f"csv.types.{column}: expected one of {list(CSV_TYPES)}, got {kind!r}")
        if kind == "text" and column in qis and qis[column].numeric:
            raise SpecError(f"csv.types.{column}: a numeric quasi-identifier is read as a number, not as text")
    return CsvFormat(tuple(missing), dict(types))


def _quasi_identifiers(raw: Any, base: Path | None) -> dict[str, QuasiIdentifier]:
    if not isinstance(raw, Mapping) or not raw:
        raise SpecError("quasi_identifiers: expected a non-empty mapping from column to {type: ...}")
    qis = {}
    for column, conf in raw.items():
        where = f"quasi_identifiers.{column}"
        if not isinstance(conf, Mapping) or conf.get("type") not in ("numeric", "categorical"):
            raise SpecError(f"{where}.type: expected 'numeric' or 'categorical', got {conf!r}")
        if conf["type"] == "numeric":
            extra = sorted(set(conf) - {"type", "min_width"})
            if extra:
                raise SpecError(f"{where}: unknown key(s) {extra} for a numeric attribute (type, min_width)")
            width = conf.get("min_width", 0)
            if isinstance(width, bool) or not isinstance(width, int | float) or width < 0:
                raise SpecError(f"{where}.min_width: expected a number >= 0, got {width!r}")
            qis[column] = QuasiIdentifier(str(column), "numeric", float(width))
        else:
            extra = sorted(set(conf) - {"type", "hierarchy"})
            if extra:
                raise SpecError(f"{where}: unknown key(s) {extra} for a categorical attribute (type, hierarchy)")
            tree = conf.get("hierarchy")
            taxonomy = None if tree is None else Taxonomy.from_mapping(_tree(tree, base, where), f"{where}.hierarchy")
            qis[column] = QuasiIdentifier(str(column), "categorical", 0.0, taxonomy, written=taxonomy is not None)
    return qis


def _tree(tree: Any, base: Path | None, where: str) -> Any:
    """A taxonomy given inline, or as the path of a YAML file relative to the spec's folder."""
    if not isinstance(tree, str):
        return tree
    try:
        return read_yaml((base or Path.cwd()) / tree, "taxonomy file")
    except SpecError as exc:
        raise SpecError(f"{where}.hierarchy: {exc}") from exc


def _model(raw: Any) -> Model:
    """The ``model`` mapping: a registered model's name and its parameters (``ModelDescriptor.parse_params``)."""
    if not isinstance(raw, Mapping) or "name" not in raw:
        raise SpecError(f"model: expected {{name: <model>, <parameters>}}, got {raw!r}")
    model = descriptor(raw["name"])
    return Model(model.name, model.parse_params(raw))


def validate_snapshot(snapshot: pd.DataFrame, spec: Spec) -> pd.DataFrame:
    """Check ``snapshot`` against ``spec`` and return it normalised, with exactly ``spec.columns``.

    Refuses (SnapshotError naming the column and the row numbers, ``rows_text``): an empty table, a missing column, a duplicate id, a null
    in the id, a QI or the sensitive column (NaN is a null), a non-numeric value (the text "nan" included) or
    ±inf in a numeric QI, a value outside a written taxonomy or a written sensitive domain. Vectorised: one
    pass per column. Whether a column's type changed since the first release is the store's check
    (``column_kind``, ``storage.schema``)."""
    if len(snapshot) == 0:
        raise SnapshotError("snapshot is empty: a release needs at least one row")
    missing = [c for c in spec.columns if c not in snapshot.columns]
    if missing:
        raise SnapshotError(f"snapshot is missing column(s) {missing} named in spec {spec.name!r}")
    df = snapshot[spec.columns].reset_index(drop=True)
    ids = df[spec.id]
    _no_nulls(df, spec.id)
    dup = ids.duplicated(keep=False).to_numpy()
    if dup.any():
        raise SnapshotError(f"column {spec.id!r}: {int(dup.sum())} rows share {ids[dup].nunique()} id(s) "
                            f"({rows_text(dup)}); each individual appears once")
    out = {spec.id: ids}
    for name, qi in spec.quasi_identifiers.items():
        col = df[name]
        _no_nulls(df, name)
        if qi.numeric:
            num = pd.to_numeric(col, errors="coerce")
            bad = num.isna().to_numpy()
            if bad.any():
                raise SnapshotError(f"column {name!r}: non-numeric value in {rows_text(bad)}; {name} is a numeric "
                                    "quasi-identifier")
            num = num.astype(np.float64)
            infinite = ~np.isfinite(num.to_numpy())
            if infinite.any():
                raise SnapshotError(
                    f"column {name!r}: non-finite value (inf or -inf) in {rows_text(infinite)}; a numeric "
                    f"quasi-identifier is generalised to intervals, which need finite numbers: set a finite {name} "
                    "in those rows or drop them"
                )
            out[name] = num
        else:
            text = as_text(col)
            if qi.written and qi.taxonomy is not None:  # written: always has its taxonomy
                _in_domain(text, qi.taxonomy.leaves, name, "its taxonomy")
            out[name] = text
    for name in spec.non_identifiers:
        out[name] = df[name]
    sens = df[spec.sensitive]
    _no_nulls(df, spec.sensitive)
    sens = as_text(sens)
    if spec.sensitive_written:
        _in_domain(sens, spec.sensitive_values, spec.sensitive, "the sensitive domain")
    out[spec.sensitive] = sens
    return pd.DataFrame(out)


#: ``pandas.api.types.infer_dtype``'s names, as the kinds ``column_kind`` records; any other is "mixed".
_KINDS = {
    "string": "text", "unicode": "text", "bytes": "text", "integer": "integer", "floating": "float",
    "mixed-integer-float": "float", "decimal": "float", "boolean": "boolean", "datetime64": "datetime",
    "datetime": "datetime", "date": "datetime",
}


def column_kind(values: pd.Series) -> str:
    """The kind of value a snapshot column holds as read, before ``validate_snapshot`` normalises it (a numeric
    quasi-identifier to float, a categorical or the sensitive column to text): "text", "integer", "float",
    "boolean", "datetime", or "mixed" (an object column of several kinds). A pandas categorical counts as the
    kind of its categories. Nulls are ignored. The store records it on the first release and refuses a change
    (``storage.schema``): a categorical ``sex`` that arrives as integers 0/1 would otherwise be published as new
    leaves beside F and M. O(rows) for an object column, O(1) otherwise."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        values = pd.Series(values.cat.categories)
    return _KINDS.get(pd.api.types.infer_dtype(values, skipna=True), "mixed")


def rows_text(mask: np.ndarray) -> str:
    """Where the boolean ``mask`` over a snapshot's rows is set, for a message: ``row 3`` or ``rows 3, 8, 9 and
    4 more``, numbered from 1 in the snapshot's order (a CSV's data lines, the header not counted): a message
    points at rows by number, never by id or value."""
    rows = (np.flatnonzero(mask) + 1).tolist()
    shown = ", ".join(map(str, rows[:3])) + (f" and {len(rows) - 3} more" if len(rows) > 3 else "")
    return f"row{'s' if len(rows) > 1 else ''} {shown}"


def _no_nulls(df: pd.DataFrame, column: str) -> None:
    nulls = df[column].isna().to_numpy()
    if nulls.any():
        raise SnapshotError(f"column {column!r}: null value in {rows_text(nulls)}; {column} must be set in every row")


def _in_domain(values: pd.Series, domain, column: str, what: str) -> None:
    bad = ~values.isin(pd.Index(domain)).to_numpy()
    if bad.any():
        raise SnapshotError(
            f"column {column!r}: {int(bad.sum())} value(s) not in {what} ({len(domain)} values, e.g. "
            f"{list(domain[:5])}) in {rows_text(bad)}"
        )
