"""The release spec (core/spec.py): every key parsed, every bad key refused with a message naming it, and the
snapshot validator refusing bad tables with a message naming the column and the row."""

from __future__ import annotations

import copy
import textwrap

import numpy as np
import pandas as pd
import pytest
import yaml

from dagster_privrelease.core import models
from dagster_privrelease.core.spec import BoundSpec, load_spec, parse_spec, validate_snapshot
from dagster_privrelease.errors import SnapshotError, SpecError

EDUCATION = {"Any": {"School": ["primary", "secondary"], "University": ["bachelor", "master", "doctorate"]}}


def raw_spec(**overrides) -> dict:
    """A complete spec using every key; ``overrides`` replace top-level keys (None removes one)."""
    raw = {
        "name": "clinic",
        "id": "pid",
        "sensitive": {"name": "disease", "values": ["flu", "gastritis", "dyspepsia", "bronchitis"]},
        "quasi_identifiers": {
            "age": {"type": "numeric", "min_width": 2},
            "education": {"type": "categorical", "hierarchy": copy.deepcopy(EDUCATION)},
            "city": {"type": "categorical"},
        },
        "non_identifiers": ["visits"],
        "model": {"name": "m_invariance", "m": 3},
        "seed": 42,
    }
    for key, value in overrides.items():
        if value is None:
            raw.pop(key)
        else:
            raw[key] = value
    return raw


def snapshot(n: int = 6) -> pd.DataFrame:
    return pd.DataFrame({
        "pid": np.arange(100, 100 + n),
        "age": np.arange(30, 30 + n),
        "education": (["primary", "master", "doctorate"] * n)[:n],
        "city": (["Oslo", "Lima"] * n)[:n],
        "visits": np.arange(n) % 3,
        "disease": (["flu", "gastritis", "dyspepsia"] * n)[:n],
        "extra": "dropped",
    })


# ----------------------------------------------------------------------------------------------- parsing


def test_every_key_is_parsed():
    spec = parse_spec(raw_spec())
    assert (spec.name, spec.id, spec.sensitive, spec.seed) == ("clinic", "pid", "disease", 42)
    assert spec.sensitive_values == ("flu", "gastritis", "dyspepsia", "bronchitis") and spec.sensitive_written
    assert list(spec.quasi_identifiers) == ["age", "education", "city"]
    age, education, city = spec.quasi_identifiers.values()
    assert age.numeric and age.min_width == 2.0 and age.taxonomy is None
    assert education.type == "categorical" and education.written
    assert education.taxonomy.leaves == ("primary", "secondary", "bachelor", "master", "doctorate")
    assert city.type == "categorical" and city.taxonomy is None and not city.written
    assert spec.non_identifiers == ("visits",)
    assert spec.model.name == "m_invariance"
    assert spec.model.params == {"m": 3, "hold_back": False, "categorical": "interval",
                                 "first_release": "counterfeited"}
    assert spec.columns == ["pid", "age", "education", "city", "visits", "disease"]
    assert not isinstance(spec, BoundSpec)


def test_defaults_of_optional_keys():
    spec = parse_spec(raw_spec(non_identifiers=None, seed=None, sensitive="disease",
                               model={"name": "l_diversity", "l": 2}))
    assert spec.non_identifiers == () and spec.seed == 0
    assert spec.sensitive_values is None and not spec.sensitive_written
    assert spec.model.params == {"l": 2, "form": "frequency"}
    assert spec.quasi_identifiers["age"].min_width == 2.0
    bare = parse_spec(raw_spec(quasi_identifiers={"age": {"type": "numeric"}}))
    assert bare.quasi_identifiers["age"].min_width == 0.0


#: Values for the required parameters that have no smallest value to take (lists, mappings), by parameter name.
REQUIRED_EXAMPLES = {"X": ["age", "city"], "Y": ["disease"], "k": 2}


def test_every_registered_model_parses_with_its_required_parameters():
    for name in models.names():
        schema = models.descriptor(name).params
        params = {key: (p.minimum if p.kind is int else p.default) for key, p in schema.items()}
        params = {k: (int(v) if isinstance(v, float) else v) for k, v in params.items()}
        params |= {k: v for k, v in REQUIRED_EXAMPLES.items() if k in schema and params[k] is None}
        spec = parse_spec(raw_spec(model={"name": name, **params}))
        assert spec.model.name == name and set(spec.model.params) == set(schema)


def test_load_spec_reads_taxonomy_files_relative_to_the_spec(tmp_path):
    (tmp_path / "hierarchies").mkdir()
    (tmp_path / "hierarchies" / "edu.yaml").write_text("Any:\n  Low: [primary, secondary]\n  High: [master]\n")
    (tmp_path / "spec.yaml").write_text(textwrap.dedent("""\
        name: clinic
        id: pid
        sensitive: disease
        quasi_identifiers:
          education: {type: categorical, hierarchy: hierarchies/edu.yaml}
        model: {name: k_anonymity, k: 2}
        """))
    spec = load_spec(tmp_path / "spec.yaml")
    qi = spec.quasi_identifiers["education"]
    assert qi.written and qi.taxonomy.leaves == ("primary", "secondary", "master")
    assert [n.name for n in qi.taxonomy.nodes] == ["Any", "Low", "primary", "secondary", "High", "master"]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (["not", "a", "mapping"], "spec: expected a mapping of keys, got list"),
        (raw_spec(colour="red"), r"spec: unknown key\(s\) \['colour'\]"),
        (raw_spec(model=None), "spec: missing required key 'model'"),
        (raw_spec(id=None), "spec: missing required key 'id'"),
        (raw_spec(name=""), "name: expected a non-empty string, got ''"),
        (raw_spec(id=7), "id: expected a non-empty string, got 7"),
        (raw_spec(sensitive=["disease"]), r"sensitive: expected a column name or \{name: \.\.\., values"),
        (raw_spec(sensitive={"name": "disease", "domain": ["flu"]}), "sensitive: expected a column name"),
        (raw_spec(sensitive={"name": "disease", "values": []}), "sensitive.values: expected a non-empty list"),
        (raw_spec(quasi_identifiers={}), "quasi_identifiers: expected a non-empty mapping"),
        (raw_spec(quasi_identifiers=["age"]), "quasi_identifiers: expected a non-empty mapping"),
        (raw_spec(quasi_identifiers={"age": {"type": "number"}}), "quasi_identifiers.age.type: expected 'numeric'"),
        (raw_spec(quasi_identifiers={"age": "numeric"}), "quasi_identifiers.age.type: expected 'numeric'"),
        (raw_spec(quasi_identifiers={"age": {"type": "numeric", "hierarchy": {}}}),
         r"quasi_identifiers.age: unknown key\(s\) \['hierarchy'\] for a numeric attribute"),
        (raw_spec(quasi_identifiers={"age": {"type": "numeric", "min_width": -1}}),
         "quasi_identifiers.age.min_width: expected a number >= 0, got -1"),
        (raw_spec(quasi_identifiers={"age": {"type": "numeric", "min_width": True}}),
         "quasi_identifiers.age.min_width: expected a number >= 0, got True"),
        (raw_spec(quasi_identifiers={"age": {"type": "numeric", "min_width": "2"}}),
         "quasi_identifiers.age.min_width: expected a number >= 0, got '2'"),
        (raw_spec(quasi_identifiers={"city": {"type": "categorical", "min_width": 1}}),
         r"quasi_identifiers.city: unknown key\(s\) \['min_width'\] for a categorical attribute"),
        (raw_spec(non_identifiers="visits"), "non_identifiers: expected a list of column names"),
        (raw_spec(non_identifiers=["visits", 3]), "non_identifiers: expected a list of column names"),
        (raw_spec(non_identifiers=["age"]), r"spec: column\(s\) \['age'\] have more than one role"),
        (raw_spec(id="disease"), r"spec: column\(s\) \['disease'\] have more than one role"),
        (raw_spec(seed="42"), "seed: expected an integer, got '42'"),
        (raw_spec(seed=True), "seed: expected an integer, got True"),
        (raw_spec(seed=-1), "seed: expected an integer >= 0, got -1"),
    ],
)
def test_bad_spec_is_refused_naming_the_key(raw, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(raw)


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("m_invariance", r"model: expected \{name: <model>, <parameters>\}, got 'm_invariance'"),
        ({"m": 2}, r"model: expected \{name: <model>"),
        ({"name": "t_closeness", "t": 0.2}, r"model.name: unknown model 't_closeness'; the models are \["),
        ({"name": "m_invariance", "m": 2, "k": 3}, r"model: unknown parameter\(s\) \['k'\] for m_invariance"),
        ({"name": "k_anonymity"}, "model.k: k_anonymity needs the parameter 'k'"),
        ({"name": "k_anonymity", "k": None}, "model.k: k_anonymity needs the parameter 'k'"),
        ({"name": "k_anonymity", "k": "5"}, "model.k: expected an integer, got '5'"),
        ({"name": "k_anonymity", "k": 2.5}, "model.k: expected an integer, got 2.5"),
        ({"name": "k_anonymity", "k": True}, "model.k: expected an integer, got True"),
        ({"name": "k_anonymity", "k": 1}, "model.k: must be at least 2, got 1"),
        ({"name": "l_diversity", "l": 0}, "model.l: must be at least 2, got 0"),
        ({"name": "m_invariance", "m": 1}, "model.m: must be at least 2, got 1"),
        ({"name": "m_invariance", "m": 2, "hold_back": "yes"}, "model.hold_back: expected true or false, got 'yes'"),
        ({"name": "l_diversity", "l": 2, "form": 3}, "model.form: expected a string, got 3"),
        ({"name": "m_invariance", "m": 2, "categorical": "closure"},
         r"model.categorical: must be one of \['interval', 'node'\], got 'closure'"),
        ({"name": "m_invariance", "m": 2, "first_release": "incognito"},
         r"model.first_release: must be one of \['counterfeited', 'mondrian'\], got 'incognito'"),
        ({"name": "l_diversity", "l": 2, "form": "entropy"},
         r"model.form: must be one of \['frequency', 'distinct'\], got 'entropy'"),
    ],
)
def test_bad_model_is_refused_naming_the_parameter(model, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(raw_spec(model=model))


def test_diversity_larger_than_the_written_sensitive_domain_is_refused_at_load():
    with pytest.raises(SpecError, match=r"model.m: m=5 is larger than the 4 distinct values of the sensitive column "
                                        r"'disease'"):
        parse_spec(raw_spec(model={"name": "m_invariance", "m": 5}))
    with pytest.raises(SpecError, match="model.l: l=5 is larger than the 4 distinct values"):
        parse_spec(raw_spec(model={"name": "l_diversity", "l": 5}))
    assert parse_spec(raw_spec(model={"name": "m_invariance", "m": 4})).model.params["m"] == 4
    # k is not a diversity parameter: k-anonymity does not need k distinct sensitive values
    assert parse_spec(raw_spec(model={"name": "k_anonymity", "k": 50})).model.params["k"] == 50


def test_repeated_sensitive_values_do_not_count_twice():
    with pytest.raises(SpecError, match=r"sensitive.values: value\(s\) \['flu'\] listed more than once"):
        parse_spec(raw_spec(sensitive={"name": "disease", "values": ["flu", "flu", "gastritis"]}))


def test_diversity_larger_than_the_sensitive_values_of_the_data_is_refused_at_bind():
    spec = parse_spec(raw_spec(sensitive="disease"))  # m = 3, domain from the data
    assert spec.bind(snapshot()).sensitive_values == ("dyspepsia", "flu", "gastritis")
    with pytest.raises(SpecError, match=r"model.m: m=3 is larger than the 2 distinct values of the sensitive column"):
        spec.bind(snapshot().assign(disease=["flu", "gastritis"] * 3))


@pytest.mark.parametrize(
    ("tree", "message"),
    [
        ({"A": ["x"], "B": ["y"]},
         "quasi_identifiers.education.hierarchy: a taxonomy is a mapping with exactly one root"),
        (["x", "y"], "a taxonomy is a mapping with exactly one root key"),
        ({"Any": {}}, r"quasi_identifiers.education.hierarchy.Any: node 'Any' has no children"),
        ({"Any": {"Low": []}}, r"hierarchy.Any.Low: node 'Low' has an empty list of leaves"),
        ({"Any": {"Low": ["x", ["y"]]}}, r"hierarchy.Any.Low: leaves of 'Low' must be plain values, got \['y'\]"),
        ({"Any": {"Low": "x"}}, r"hierarchy.Any.Low: node 'Low' must map to a mapping or a list of leaves, got 'x'"),
        ({"Any": {"Low": ["x", "y"], "High": ["y"]}}, "quasi_identifiers.education.hierarchy: leaf 'y' appears more"),
    ],
)
def test_bad_taxonomy_is_refused_naming_the_node(tree, message):
    qis = {"education": {"type": "categorical", "hierarchy": tree}}
    with pytest.raises(SpecError, match=message):
        parse_spec(raw_spec(quasi_identifiers=qis))


def test_bad_files_are_refused_naming_them(tmp_path):
    with pytest.raises(SpecError, match=r"missing.yaml: cannot read the spec"):
        load_spec(tmp_path / "missing.yaml")
    (tmp_path / "broken.yaml").write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match=r"broken.yaml: not valid YAML at line 2, column 1: "):
        load_spec(tmp_path / "broken.yaml")
    qis = {"education": {"type": "categorical", "hierarchy": "nowhere.yaml"}}
    with pytest.raises(SpecError, match=r"quasi_identifiers.education.hierarchy: .*nowhere.yaml: cannot read the "
                                        r"taxonomy file"):
        parse_spec(raw_spec(quasi_identifiers=qis), base=tmp_path)
    (tmp_path / "bad_tree.yaml").write_text("Any: [x, y\n")
    qis = {"education": {"type": "categorical", "hierarchy": "bad_tree.yaml"}}
    with pytest.raises(SpecError, match=r"quasi_identifiers.education.hierarchy: .*bad_tree.yaml: not valid YAML at "
                                        r"line 2"):
        parse_spec(raw_spec(quasi_identifiers=qis), base=tmp_path)


def test_malformed_yaml_is_one_line_naming_file_line_and_column(tmp_path):
    path = tmp_path / "clinic.yaml"
    path.write_text("name: clinic\nid: pid\nsensitive: disease\n  model: {name: k_anonymity, k: 2}\n")
    with pytest.raises(SpecError) as refused:
        load_spec(path)
    assert str(refused.value) == f"{path}: not valid YAML at line 4, column 8: mapping values are not allowed here"


def test_libyamls_reader_reads_what_the_pure_python_one_reads_and_refuses_a_repeated_key():
    """``yamlfile.FastStrictLoader`` (libyaml's parser) builds the same data as ``StrictLoader`` from every spec
    and taxonomy file of ``resources/``, and refuses a key written twice on its own (the message is then the
    pure-Python reader's: the test above)."""
    from pathlib import Path

    from dagster_privrelease.core.yamlfile import FastStrictLoader, StrictLoader

    files = sorted(Path(__file__).parents[2].joinpath("resources").rglob("*.yaml"))
    assert len(files) > 10
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert yaml.load(text, Loader=FastStrictLoader) == yaml.load(text, Loader=StrictLoader), path
    with pytest.raises(yaml.constructor.ConstructorError, match="'Low' is written twice"):
        yaml.load("Any:\n  Low: [primary]\n  Low: [secondary]\n", Loader=FastStrictLoader)


def test_a_key_written_twice_is_refused_naming_key_file_and_line(tmp_path):
    spec = yaml.safe_dump(raw_spec(), sort_keys=False)
    path = tmp_path / "clinic.yaml"
    path.write_text(spec + "seed: 3\n")
    first = spec.splitlines().index("seed: 42") + 1
    with pytest.raises(SpecError) as refused:
        load_spec(path)
    assert str(refused.value) == (f"{path}: not valid YAML at line {len(spec.splitlines()) + 1}, column 1: key "
                                  f"'seed' is written twice in one mapping (first at line {first}); write each key once")
    tree = tmp_path / "tree.yaml"
    tree.write_text("Any:\n  Low: [primary]\n  Low: [secondary]\n")
    qis = {"education": {"type": "categorical", "hierarchy": "tree.yaml"}}
    with pytest.raises(SpecError, match=r"tree.yaml: not valid YAML at line 3, column 3: key 'Low' is written twice"):
        parse_spec(raw_spec(quasi_identifiers=qis), base=tmp_path)
    merged = tmp_path / "merged.yaml"  # a merged key may be overridden: that is not a key written twice
    merged.write_text(textwrap.dedent("""\
        name: clinic
        id: pid
        sensitive: disease
        quasi_identifiers:
          age: &number {type: numeric, min_width: 2}
          weight:
            <<: *number
            min_width: 5
        model: {name: k_anonymity, k: 2}
    """))
    assert load_spec(merged).quasi_identifiers["weight"].min_width == 5


# ----------------------------------------------------------------------------------------------- snapshots


def test_validate_snapshot_normalises():
    spec = parse_spec(raw_spec())
    out = validate_snapshot(snapshot().assign(age=lambda d: d["age"].astype(str)), spec)
    assert out.columns.tolist() == spec.columns  # 'extra' dropped, spec order
    assert out["age"].dtype == np.float64 and out["age"].tolist() == [30.0, 31.0, 32.0, 33.0, 34.0, 35.0]
    assert out["education"].map(type).eq(str).all() and out["disease"].map(type).eq(str).all()
    assert out["pid"].tolist() == list(range(100, 106))
    assert out["visits"].tolist() == [0, 1, 2, 0, 1, 2]


def test_validate_snapshot_reads_categorical_codes_as_strings():
    spec = parse_spec(raw_spec(quasi_identifiers={"zone": {"type": "categorical", "hierarchy": {"Any": [1, 2]}}},
                               non_identifiers=None))
    out = validate_snapshot(snapshot().assign(zone=[1, 2, 1, 2, 1, 2]), spec)
    assert out["zone"].tolist() == ["1", "2", "1", "2", "1", "2"]


def _broken(column: str, row: int, value) -> pd.DataFrame:
    df = snapshot()
    df[column] = df[column].astype(object)
    df.loc[row, column] = value
    return df


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (snapshot().iloc[:0], "snapshot is empty"),
        (snapshot().drop(columns=["education", "visits"]),
         r"snapshot is missing column\(s\) \['education', 'visits'\] named in spec 'clinic'"),
        (_broken("pid", 2, None), "column 'pid': null value in row 3;"),
        (snapshot().assign(pid=[1, 2, 3, 2, 3, 4]), r"column 'pid': 4 rows share 2 id\(s\) \(rows 2, 3, 4 and 1 more\)"),
        (_broken("age", 3, np.nan), "column 'age': null value in row 4; age must be set in every row"),
        (_broken("education", 1, None), "column 'education': null value in row 2;"),
        (_broken("city", 5, None), "column 'city': null value in row 6;"),
        (_broken("disease", 4, None), "column 'disease': null value in row 5;"),
        (_broken("age", 2, "thirty"),
         "column 'age': non-numeric value in row 3; age is a numeric quasi-identifier"),
        (_broken("education", 4, "kindergarten"),
         r"column 'education': 1 value\(s\) not in its taxonomy \(5 values, .*\) in row 5$"),
        (_broken("disease", 0, "cold"),
         r"column 'disease': 1 value\(s\) not in the sensitive domain \(4 values, .*\) in row 1$"),
    ],
)
def test_bad_snapshot_is_refused_naming_column_and_row(table, message):
    with pytest.raises(SnapshotError, match=message):
        validate_snapshot(table, parse_spec(raw_spec()))


def test_bind_fills_flat_taxonomies_and_grows_them_keeping_ranks():
    spec = parse_spec(raw_spec(sensitive="disease", model={"name": "k_anonymity", "k": 2}))
    first = spec.bind(validate_snapshot(snapshot(), spec))
    assert isinstance(first, BoundSpec) and set(first.taxonomies) == {"education", "city"}
    city = first.taxonomy("city")
    assert city.leaves == ("Lima", "Oslo") and not first.quasi_identifiers["city"].written
    assert first.quasi_identifiers["education"].taxonomy is spec.quasi_identifiers["education"].taxonomy
    later = snapshot().assign(city=["Accra", "Oslo", "Zagreb", "Lima", "Oslo", "Accra"],
                              disease=["asthma", "flu", "flu", "flu", "flu", "flu"])
    second = first.bind(validate_snapshot(later, first))
    assert second.quasi_identifiers["city"].taxonomy.leaves == ("Lima", "Oslo", "Accra", "Zagreb")
    assert second.sensitive_values == ("dyspepsia", "flu", "gastritis", "asthma")


def test_a_written_domain_does_not_grow():
    spec = parse_spec(raw_spec())
    bound = spec.bind(validate_snapshot(snapshot(), spec))
    assert bound.sensitive_values == spec.sensitive_values
    assert bound.quasi_identifiers["education"].taxonomy is spec.quasi_identifiers["education"].taxonomy


@pytest.mark.parametrize(("overrides", "message"), [
    ({"name": "clinic-2024"}, r"^name: 'clinic-2024' is not a valid table name: .*letters, digits and underscores "
                              r"\(e\.g\. 'clinic_2024'\)$"),
    ({"name": "clinic 2024"}, r"^name: 'clinic 2024' is not a valid table name"),
    ({"id": "release_id"}, r"^id: column 'release_id' has a name the release store reserves"),
    ({"sensitive": "Group_ID"}, r"^sensitive: column 'Group_ID' has a name the release store reserves"),
    ({"quasi_identifiers": {"age__lo": {"type": "numeric"}}},
     r"^quasi_identifiers\.age__lo: column 'age__lo' has a name the release store reserves"),
    ({"non_identifiers": ["visits", "city__HI"]}, r"^non_identifiers: column 'city__HI' has a name"),
    ({"non_identifiers": ["seq"]}, r"^non_identifiers: column 'seq' has a name the release store reserves"),
    ({"non_identifiers": ["City"]}, r"^spec: columns \['City', 'city'\] differ only in case"),
])
def test_names_dagster_or_the_store_cannot_use_are_refused(overrides, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(raw_spec(**overrides))


def test_the_query_error_workload_is_set_by_the_spec():
    assert parse_spec(raw_spec()).utility.selectivity == 0.1  # Xiao-Tao §5.2's default
    spec = parse_spec(raw_spec(utility={"selectivity": 0.3, "queries": 50}))
    assert (spec.utility.selectivity, spec.utility.queries) == (0.3, 50)
    for bad, key in (({"selectivity": 0}, "utility.selectivity"), ({"selectivity": 1.5}, "utility.selectivity"),
                     ({"queries": 0}, "utility.queries"), ({"theta": 0.2}, "utility:")):
        with pytest.raises(SpecError, match=key):
            parse_spec(raw_spec(utility=bad))
