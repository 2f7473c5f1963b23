"""(X, Y)-privacy (core/models/xy_privacy, TDS4SA) on Adult as Wang-Fung §6 splits it (Table 2), and the
scalability scheme of §6.1-6.2 to 1M rows per table.

Data: UCI Adult, train + test without missing values (45,222 rows, ``datasets.load_adult``), **not resampled**
for the utility figures. Taxation T1 = the 6 continuous attributes Ag, Cg, Cl, En, Fw, H, the categorical
E, O, W, the common M, Re, S, and Class (income); Immigration T2 = M, Re, S, Nc, Ra, published first as it is.
Set A: T1 without its continuous attributes; Set B: with them. Taxonomies: resources/hierarchies for E, M, S, W,
Ra, Nc; occupation and relationship (no file there) as ``OCCUPATION`` / ``RELATIONSHIP`` below (3 levels each,
as Table 2 counts them).

Utility (§6): the whole table is generalised, then the classifier is trained on the generalised training part
(Adult's 30,162 train rows) and tested on the generalised test part (its 15,060 test rows). scikit-learn's
``DecisionTreeClassifier`` stands in for C4.5 (``classifier``: entropy criterion, ``MIN_LEAF`` records per leaf
as C4.5's pruning stand-in; categorical values one-hot, intervals by their midpoint). Distortion as §6 ([17]):
one unit per taxonomy level a categorical value climbs, ``(b - a) / (f2 - f1)`` for a continuous value
generalised to ``[a, b]``, per record.

- XYE / XYD: TDS4SA, info ``class``, TopN (§6.1): X = the N top ranked attributes of T1 ∪ the join attributes
  ∪ att(T2) (so Case 1 of §5.4), Y = K1 (a key of T1), k = 40, 80, 120, 160, 200 (averaged, as Figs. 1-4).
- KAE / KAD: k-anonymity of T1 with QID = att(T1), by the same top-down specialisation (TDS, the paper's [5]):
  (X, Y)-anonymity of T1 alone with X = att(T1), Y = K1 (a_Y(x) = |T1[x]|, Theorem 4.1 with no earlier release).
- BLE: the unmodified T1; RJE: T1 without the join attributes M, Re, S.

Scalability (§6.1, Fig. 5; §6.2, Fig. 8): Set A enlarged by the variation scheme: each record r of T_i gets
alpha - 1 variations with a fresh key K_i and ``Q`` attributes of X_i chosen uniformly at random set to values
drawn uniformly from their domains, the others inherited from r (for linkability the Y value is inherited too);
alpha x 45,222 rows per table. Anonymity: Top6, Y = K1, k = 40. Linkability: Top1 of §6.2, Y = {T1.M} with its
50% least frequent values sensitive at k = 90%, X = the other attributes of T1 and T2.Re, T2.S (not T2.Ra,
T2.Nc, T2.M). Times are CPU seconds of ``publish`` (``time.process_time``; the machine is shared, so wall time is
printed beside it but not compared), against the floor of one DuckDB sort of T1 in the same run.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from dagster_privrelease import datasets
from dagster_privrelease.core.hierarchy import Taxonomy
from dagster_privrelease.core.models.xy_privacy import publish
from dagster_privrelease.core.release import PreviousRelease, Release
from dagster_privrelease.core.spec import BoundSpec, parse_spec
from dagster_privrelease.errors import NotPublishable
from dagster_privrelease.pipeline import model_spec

from .common import ROOT, figure, loaded, print_table, ratio, read_sort_floor, skip, verdict

OCCUPATION = {"Any occupation": {
    "White collar": ["Adm-clerical", "Exec-managerial", "Prof-specialty", "Sales", "Tech-support"],
    "Blue collar": ["Craft-repair", "Farming-fishing", "Handlers-cleaners", "Machine-op-inspct", "Transport-moving"],
    "Service": ["Other-service", "Priv-house-serv", "Protective-serv", "Armed-Forces"]}}
RELATIONSHIP = {"Any relationship": {
    "Spouse": ["Husband", "Wife"], "Relative": ["Own-child", "Other-relative"],
    "Not family": ["Not-in-family", "Unmarried"]}}
FILES = {"education": "adult_education.yaml", "workclass": "adult_workclass.yaml",
         "marital_status": "adult_marital_status.yaml", "sex": "adult_sex.yaml", "race": "adult_race.yaml",
         "native_country": "adult_native_country.yaml"}
CONTINUOUS = ("age", "capital_gain", "capital_loss", "education_num", "fnlwgt", "hours_per_week")
T1_CATEGORICAL = ("education", "occupation", "workclass")
JOIN = ("marital_status", "relationship", "sex")
T2_ONLY = ("native_country", "race")
CLASS = "income"
RANK_A = ("marital_status", "relationship", "sex", "education", "occupation", "workclass")  # §6 Set A
RANK_B = ("capital_gain", "age", "marital_status", "education_num", "relationship", "hours_per_week", "sex")  # Set B
TRAIN_ROWS = 30_162  # Adult's adult.data rows without a missing value; the rest is adult.test
KS = (40, 80, 120, 160, 200)
PAPER = {"A": {"BLE": 17.5, "RJE": 22.3, "KAE": 18.4, "XYE-BLE": "<= 0.9"},
         "B": {"BLE": 14.7, "RJE": 17.3, "KAE": 18.2, "XYE-BLE": "~ 0.75"}}
MIN_LEAF = 20
Q = 2  # attributes of X_i re-drawn in a §6.1 variation (the paper leaves q open)
SCALES = (45_222, 200_000, 500_000, 1_000_000)
TARGET_SECONDS = 20.0


def taxonomy_trees() -> dict[str, dict]:
    """The nested mapping of every categorical attribute's taxonomy."""
    trees = {a: yaml.safe_load((ROOT / "resources" / "hierarchies" / f).read_text()) for a, f in FILES.items()}
    return trees | {"occupation": OCCUPATION, "relationship": RELATIONSHIP}


def t1_attributes(set_name: str) -> tuple[str, ...]:
    """att(T1) without Class: Set A categorical only, Set B with the continuous attributes."""
    return (*(CONTINUOUS if set_name == "B" else ()), *T1_CATEGORICAL, *JOIN)


def adult_spec(set_name: str, trees: dict[str, dict], **model) -> BoundSpec:
    """The spec of the whole Adult table (every attribute of T1 and T2) with ``model``'s parameters, bound
    later to T1's rows. ``K1`` (a key of T1) is a non-identifier; Class (income) is the sensitive column,
    published with T1 (``publish_sensitive``)."""
    qis: dict = {a: {"type": "numeric"} for a in (CONTINUOUS if set_name == "B" else ())}
    qis |= {a: {"type": "categorical", "hierarchy": trees[a]} for a in (*T1_CATEGORICAL, *JOIN, *T2_ONLY)}
    return parse_spec({"name": f"adult_set_{set_name}", "id": "id", "sensitive": CLASS, "quasi_identifiers": qis,
                       "non_identifiers": ["K1"], "model": {"name": "xy_privacy", "publish_sensitive": True,
                                                            **model}})  # type: ignore[return-value]


def published_t2(t2: pd.DataFrame, trees: dict[str, dict]) -> pd.DataFrame:
    """T2 = (M, Re, S, Nc, Ra) as the store keeps a release published as it is (release 1): each value its own
    leaf range, no group."""
    out = {"release_id": np.ones(len(t2), dtype=np.int64), "group_id": pd.array([pd.NA] * len(t2), dtype="Int64")}
    for a in (*JOIN, *T2_ONLY):
        rank = Taxonomy.from_mapping(trees[a]).rank
        ranks = t2[a].map(rank).to_numpy(np.float64)
        out |= {a: t2[a].to_numpy(), f"{a}__lo": ranks, f"{a}__hi": ranks}
    return pd.DataFrame(out)


def enlarge(table: pd.DataFrame, alpha: int, attributes: Sequence[str], rng: np.random.Generator,
            key: str = "K1") -> pd.DataFrame:
    """§6.1's variations: every record and alpha - 1 variations of it, each with a fresh ``key`` (and id) and
    ``Q`` of ``attributes`` drawn uniformly, set to values drawn uniformly from their domains in ``table``."""
    n = len(table)
    out = table.iloc[np.tile(np.arange(n), alpha)].reset_index(drop=True)
    varied = np.arange(n, alpha * n)
    chosen = np.argsort(rng.random((len(varied), len(attributes))), axis=1)[:, :Q]
    for j, a in enumerate(attributes):
        rows = varied[(chosen == j).any(axis=1)]
        domain = np.sort(table[a].unique())
        values = out[a].to_numpy().copy()
        values[rows] = domain[rng.integers(0, len(domain), len(rows))]
        out[a] = values
    out["id"] = np.arange(len(out), dtype=np.int64)
    out[key] = out["id"]
    return out


def run(t1: pd.DataFrame, t2: pd.DataFrame | None, spec, attributes: Sequence[str]) -> tuple[Release, float, float]:
    """``publish`` of T1 after T2 (a first release when ``t2`` is None): the release, CPU and wall seconds."""
    bound = model_spec(spec.bind(t1), tuple(attributes))
    previous = None if t2 is None else PreviousRelease(1, t1, t2, pd.DataFrame(), pd.DataFrame(), earlier=t2)
    clock, start = time.process_time(), time.perf_counter()
    release = publish(t1, bound, previous, np.random.default_rng(0))  # type: ignore[arg-type]
    return release, time.process_time() - clock, time.perf_counter() - start


# ------------------------------------------------------------------------------------------------ utility (§6)


def record_view(release: Release, attributes: Sequence[str]) -> pd.DataFrame:
    """Each record's published values on ``attributes`` (label, ``__lo``, ``__hi``), in T1's row order: the box
    of its group (``hosting`` is in T1's order; every release of this model is homogeneous)."""
    columns = [c for a in attributes for c in (a, f"{a}__lo", f"{a}__hi")]
    boxes = release.table.drop_duplicates("group_id").set_index("group_id")[columns]
    return boxes.loc[release.hosting["group_id"].to_numpy()].reset_index(drop=True)


def raw_view(t1: pd.DataFrame, attributes: Sequence[str], trees: dict[str, dict]) -> pd.DataFrame:
    """T1 unmodified, shaped like ``record_view``."""
    out = {}
    for a in attributes:
        values = t1[a].to_numpy()
        bound = values.astype(np.float64) if a in CONTINUOUS else t1[a].map(
            Taxonomy.from_mapping(trees[a]).rank).to_numpy(np.float64)
        out |= {a: values, f"{a}__lo": bound, f"{a}__hi": bound}
    return pd.DataFrame(out)


def classification_error(view: pd.DataFrame, attributes: Sequence[str], labels: np.ndarray) -> float:
    """§6's classification metric: a decision tree (``DecisionTreeClassifier``, C4.5's stand-in: entropy,
    ``MIN_LEAF``) trained on the generalised training rows, its error on the generalised test rows.
    Categorical values are one-hot, intervals their midpoint."""
    from sklearn.tree import DecisionTreeClassifier

    categorical = [a for a in attributes if a not in CONTINUOUS]
    features = pd.get_dummies(view[categorical].astype(str), dtype=np.uint8) if categorical else pd.DataFrame()
    for a in attributes:
        if a in CONTINUOUS:
            features[a] = (view[f"{a}__lo"] + view[f"{a}__hi"]) / 2
    matrix = features.to_numpy(np.float32)
    tree = DecisionTreeClassifier(criterion="entropy", min_samples_leaf=MIN_LEAF, random_state=0)
    tree.fit(matrix[:TRAIN_ROWS], labels[:TRAIN_ROWS])
    return float(np.mean(tree.predict(matrix[TRAIN_ROWS:]) != labels[TRAIN_ROWS:]))


def distortion(view: pd.DataFrame, t1: pd.DataFrame, attributes: Sequence[str],
               trees: dict[str, dict]) -> tuple[float, float]:
    """§6's distortion metric ([17]) per record, ``(categorical, continuous)``: one unit per taxonomy level a
    categorical value climbs; ``(b - a) / (f2 - f1)`` for a continuous value published as ``[a, b]``."""
    cat = cont = 0.0
    for a in attributes:
        if a in CONTINUOUS:
            span = float(t1[a].max() - t1[a].min()) or 1.0
            cont += float(((view[f"{a}__hi"] - view[f"{a}__lo"]) / span).sum())
            continue
        taxonomy = Taxonomy.from_mapping(trees[a])
        depth = {node.name: node.depth for node in taxonomy.nodes}
        cat += float((t1[a].map(depth).to_numpy() - view[a].astype(str).map(depth).to_numpy()).sum())
    return cat / len(t1), cont / len(t1)


def utility(adult: pd.DataFrame, trees: dict[str, dict], set_name: str, tops: Sequence[int],
            ks: Sequence[int] = KS) -> None:
    """Figs. 1-4 of §6.1 for one set: BLE, RJE, KAE/KAD (averaged over k) and, per TopN, XYE/XYD averaged
    over k, next to the paper's figures."""
    attributes = t1_attributes(set_name)
    t1 = adult.assign(K1=adult["id"])[["id", "K1", *attributes, CLASS]]
    t2 = published_t2(adult, trees)
    labels = (adult[CLASS] == ">50K").to_numpy()
    view = raw_view(t1, attributes, trees)
    ble = classification_error(view, attributes, labels)
    rje = classification_error(view, [a for a in attributes if a not in JOIN], labels)
    kae, kad, cpu = [], [], 0.0
    for k in ks:
        spec = adult_spec(set_name, trees, X=list(attributes), Y=["K1"], k=k, info="class", class_attribute=CLASS)
        release, seconds, _ = run(t1, None, spec, attributes)
        cpu += seconds
        generalised = record_view(release, attributes)
        kae.append(classification_error(generalised, attributes, labels))
        kad.append(distortion(generalised, t1, attributes, trees))
    rows = []
    for top in tops:
        x = list(dict.fromkeys([*(RANK_A if set_name == "A" else RANK_B)[:top], *JOIN, *T2_ONLY]))
        xye, xyd = [], []
        for k in ks:
            spec = adult_spec(set_name, trees, X=x, Y=["K1"], k=k, info="class", class_attribute=CLASS)
            try:
                release, seconds, _ = run(t1, t2, spec, attributes)
            except NotPublishable as refusal:
                skip(f"Set {set_name} Top{top} k={k}", str(refusal)[:160])
                continue
            cpu += seconds
            generalised = record_view(release, attributes)
            xye.append(classification_error(generalised, attributes, labels))
            xyd.append(distortion(generalised, t1, attributes, trees))
        if not xye:
            continue
        mean_xye, mean_xyd = float(np.mean(xye)), np.mean(xyd, axis=0)
        rows.append([f"Top{top}", f"{100 * mean_xye:.2f}%", f"{100 * (mean_xye - ble):+.2f}%",
                     f"{100 * (rje - mean_xye):+.2f}%", f"{100 * (float(np.mean(kae)) - mean_xye):+.2f}%",
                     f"{mean_xyd[0]:.2f} / {mean_xyd[1]:.3f}"])
    paper = PAPER[set_name]
    mean_kad = np.mean(kad, axis=0)
    print_table(
        f"Wang-Fung §6.1 (X, Y)-anonymity on Adult, Set {set_name} (Y = K1, info class, k = {list(ks)} averaged)",
        ["TopN", "XYE", "XYE - BLE", "RJE - XYE", "KAE - XYE", "XYD cat / cont"], rows,
        note=(f"measured: BLE {100 * ble:.2f}% (paper {paper['BLE']}%), RJE {100 * rje:.2f}% (paper {paper['RJE']}%),"
              f" KAE {100 * float(np.mean(kae)):.2f}% (paper {paper['KAE']}%), KAD cat / cont {mean_kad[0]:.2f} / "
              f"{mean_kad[1]:.3f}; paper XYE - BLE {paper['XYE-BLE']}%. Classifier: scikit-learn decision tree "
              f"(entropy, min_samples_leaf={MIN_LEAF}) for C4.5; train {TRAIN_ROWS:,} rows, test "
              f"{len(t1) - TRAIN_ROWS:,}. TDS4SA CPU {cpu:.1f} s for the {len(ks) * (len(tops) + 1)} runs."))


def scalability_tables(adult: pd.DataFrame, rows: int, kind: str, trees: dict[str, dict],
                       rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame, BoundSpec, tuple[str, ...]]:
    """Set A enlarged to about ``rows`` rows per table (alpha = rows / 45,222 rounded, at least 1), T2 published,
    the spec of the §6.1 (anonymity) or §6.2 (linkability) requirement, and T1's attributes."""
    alpha = max(1, round(rows / len(adult)))
    base = adult.assign(K1=adult["id"])
    attributes = t1_attributes("A")
    if kind == "anonymity":
        spec = adult_spec("A", trees, X=[*RANK_A, *T2_ONLY], Y=["K1"], k=40)
        x1 = list(attributes)
    else:
        counts = adult["marital_status"].value_counts(ascending=True)
        sensitive = list(counts.index[: len(counts) // 2])
        x = [a for a in attributes if a != "marital_status"]
        spec = adult_spec("A", trees, X=x, Y=["T1.marital_status"], kind="linkability", k=0.9,
                          values=dict.fromkeys(sensitive, 0.9))
        x1 = x
    t1 = enlarge(base[["id", "K1", *attributes, CLASS]], alpha, x1, rng)
    t2 = enlarge(base[["id", "K1", *JOIN, *T2_ONLY]].rename(columns={"K1": "K2"}), alpha, [*JOIN, *T2_ONLY], rng,
                 key="K2")
    return t1, published_t2(t2, trees), spec, attributes


def scalability(adult: pd.DataFrame, trees: dict[str, dict], scales: Sequence[int] = SCALES) -> None:
    """Fig. 5 / Fig. 8: CPU seconds of TDS4SA at each scale, both kinds, against the floor."""
    rows_out = []
    for rows in scales:
        for kind in ("anonymity", "linkability"):
            t1, t2, spec, attributes = scalability_tables(adult, rows, kind, trees, np.random.default_rng(rows))
            try:
                release, cpu, wall = run(t1, t2, spec, attributes)
                groups = release.groups
            except NotPublishable as refusal:
                skip(f"{kind} at {len(t1):,} rows", str(refusal)[:200])
                continue
            floor_wall, floor_cpu = read_sort_floor(t1, list(attributes), Path("/tmp"))
            rows_out.append([kind, f"{len(t1):,}", f"{len(t2):,}", figure(cpu), figure(wall), groups,
                             ratio(cpu, floor_cpu), verdict(cpu, TARGET_SECONDS)])
    print_table("Wang-Fung §6.1-6.2 scalability (Set A enlarged by variations)",
                ["kind", "T1 rows", "T2 rows", "CPU s", "wall s", "T1 groups", "CPU / DuckDB sort",
                 f"<= {TARGET_SECONDS:g} s CPU"], rows_out)


def main() -> None:
    adult = loaded("(X, Y)-privacy on Adult", datasets.load_adult)
    if adult is None:
        return
    trees = taxonomy_trees()
    try:
        import sklearn  # noqa: F401
    except ImportError:
        skip("classification error (Wang-Fung §6)", "scikit-learn is missing: `make install` installs it with the dev extra "
             "(pip install -e '.[dev]')")
    else:
        utility(adult, trees, "A", tops=(3, 4, 5, 6))
        utility(adult, trees, "B", tops=(3, 5, 7))
    scalability(adult, trees)


if __name__ == "__main__":
    main()
