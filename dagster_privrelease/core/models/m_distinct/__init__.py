"""m-Distinct: re-publication of a fully dynamic table (Li & Zhou, "Challenging More Updates: Towards Anonymous
Re-publication of Fully Dynamic Datasets", /work/shared/papers/li-zhou-m-distinct.txt).

A fully dynamic table (Def. 5) changes by *external updates* (insertions and deletions, Def. 1) and *internal
updates* (a record's QI and/or sensitive values change, Def. 2). Sensitive values do not change arbitrarily: the
*candidate update set* CUS(v) (Def. 12; spec parameter ``update_sets``) lists the values v may become, v included,
and is public (implicit background knowledge, Def. 7). A QI group's *update set signature* USS(g) is the multiset
of the CUS of its sensitive values (Def. 13, counterfeits included). A set of values is a *legal update instance*
of a USS (Def. 14) when it has |USS| values, each in some CUS of the USS, and every CUS of the USS holds one of them.
Releases are m-Distinct (Def. 15) when every release is m-unique and every record's candidate sensitive set in a
release is a legal update instance of its USS in its previous release: then the adversary's SUG (Defs. 10-11) keeps
at least m nodes in every layer (Lemma 3). m-Distinct' (§IV-B, ``strict: true``) also asks that the CUSs of the
group of a record's first release be pairwise disjoint (re-publication risk at most 1/m, Lemma 4).

Like m-invariance (Xiao-Tao Lemma 4), release n reads only T(n-1), T*(n-1) and the hosting groups (§IV-A: "we only
need the information of most recent versions of the records"), and, for a record that comes back after an absence,
the group that last hosted it (its most recent version: ``ModelDescriptor.returning``, as m-invariance). ``publish`` is §V's Algorithm 1, one module per
phase; each module's docstring says how it decides where the paper leaves a choice open:

- ``update_sets``: the CUS (Def. 12), its closure and spec checks, the (V, V) CUS matrix the phases read;
- ``changes``: the refusal of an update outside the CUS of the old value (Defs. 2, 12);
- ``buckets``: the previous groups' signatures (Def. 13) and Algorithm 2 (create buckets and their intersections);
- ``assignment``: Algorithm 3, each record to the (bucket, entry) of highest eq. 3 score, fewest CNT_buc first;
- ``split``: records of no bucket grouped as a static table, balancing with counterfeits, §V-C's recursive split
  (``cuts``: the eq. 4 cut search) and the counterfeits' values drawn from their entries' CUS.

A group made of counterfeits only is dropped: it hides nobody, and every other group stays a legal instance.

Cost: per release, that of ``publish`` (see there): Algorithm 2 over the distinct previous signatures,
Algorithm 3's greedy (sequential, see ``assignment.assign_records``) and the recursive split with its eq. 4 cut
search (``cuts``), which dominate. Only release n-1 is read, so the cost does not grow with n except through the
counterfeits, which are split with the genuine rows and read back with T*(n-1): at 200k rows (Census-KDD
resampled, m = 4, d = 10, -20k/+20k and 50k updates a release, ``benchmarks/bench_m_distinct.py``) ``publish``
takes about 3 s of CPU at release 2 and at release 20. The store reads only the columns of release n-1 that
``publish`` reads (``previous_columns``: of T*(n-1) the group and the sensitive value, not its generalised QIs).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...encoding import dense_unique, encode, sensitive_codes
from ...judge.history import Bound
from ...judge.verifiers import verify_m_distinct
from ...progress import step
from ...release import PreviousRelease, Release, build_release
from ...spec import BoundSpec, Spec
from ..base import ModelDescriptor, Param, PreviousPart
from ..kernels.hosts import last_groups
from ..kernels.partition import domain_widths
from ..kernels.split import normalised, number_groups
from .assignment import assign_records, candidate_pairs
from .buckets import create_buckets, previous_signatures
from .changes import refuse_illegal_updates
from .split import generate_groups
from .update_sets import check_spec, check_update_sets, cus_matrix

__all__ = ["MODEL", "publish"]


def publish(snapshot: pd.DataFrame, spec: BoundSpec, previous: PreviousRelease | None, rng: np.random.Generator) -> Release:
    """Model ``m_distinct``: T*(n) and R(n) of the validated ``snapshot`` T(n) under the bound ``spec`` (§V,
    Algorithm 1).

    ``previous``: release n-1 (T(n-1), T*(n-1), hosting; §IV-A), None for the first release, which is the same
    algorithm with no bucket (every record new). Raises NotPublishable for an update outside the CUS of the old
    value (``refuse_illegal_updates``), for a previous group of fewer than m rows (m raised on a running history),
    and under ``strict`` when the update sets leave fewer than m disjoint classes. Deterministic given ``rng``.
    Cost: O(n) to find each record's previous version, Algorithm 2's O(B²·s²·V) over the B distinct previous signatures, Algorithm 3's sequential
    loop over the records with a choice of bucket or entry (O(their candidate pairs · d) each), then ``split``'s
    O(n·d²) per level over the records and their counterfeits; only release n-1 is read, so the cost follows the
    rows of T*(n-1) and the counterfeits made, not the release number. Its phases are reported as steps
    (``core.progress``): ``previous signatures``, ``buckets`` (Algorithm 2), ``assignment`` (Algorithm 3),
    ``split`` (§V-C), ``release table``.
    """
    m = int(spec.model.params["m"])
    strict = bool(spec.model.params.get("strict", False))
    C = cus_matrix(spec)
    codes = sensitive_codes(snapshot, spec)
    if previous is None:
        prev_uss, signatures = np.full(len(snapshot), -1, dtype=np.int64), []
    else:
        with step("previous signatures"):
            last = last_groups(snapshot, spec, previous)
            seen = last.host >= 0
            refuse_illegal_updates(last.was[seen], snapshot[spec.sensitive].astype(str).to_numpy()[seen], spec, C)
            prev_uss, signatures = previous_signatures(last, spec, C)
    X = encode(snapshot, spec)
    Xn = normalised(X, spec, domain_widths(X, spec))
    with step("buckets"):
        buckets = create_buckets(signatures, C)
    with step("assignment"):
        assigned = assign_records(buckets, candidate_pairs(buckets, prev_uss, codes, strict), codes, Xn)
    with step("split"):
        groups, fake_groups, fake_sets = generate_groups(Xn, codes, assigned, buckets, C, strict, m, rng)
    with step("release table"):
        kept = np.isin(fake_groups, groups)  # a group of counterfeits only hides nobody (module docstring)
        fake_groups, fake_sets = fake_groups[kept], fake_sets[kept]
        _, dense = dense_unique(np.concatenate([groups, fake_groups]))
        groups, fake_groups = number_groups(X, dense[: len(groups)], dense[len(groups):])
        drawn = np.argmax(fake_sets * (1.0 + rng.random(fake_sets.shape)), axis=1)
        values = np.asarray(spec.sensitive_values, dtype=object)
        counterfeits = pd.DataFrame({"group_id": fake_groups, spec.sensitive: values[drawn]})
        return build_release(snapshot, groups, spec, rng, counterfeits=counterfeits, categorical="interval", X=X)


def previous_columns(spec: BoundSpec) -> dict[PreviousPart, tuple[str, ...]]:
    """The columns of release n-1 that ``publish`` reads (``ModelDescriptor.previous_columns``): the id, the QIs and
    the sensitive value of T(n-1) (the diff of Defs. 1-2 and the CUS check of Def. 12), the group and the sensitive
    value of T*(n-1), counterfeits included (the signatures, Def. 13), and the hosting groups; the counterfeit
    counts R(n-1) are not read (one column, the least the store reads of a part)."""
    return {"snapshot": (spec.id, *spec.quasi_identifiers, spec.sensitive), "table": ("group_id", spec.sensitive),
            "counterfeits": ("group_id",), "hosting": (spec.id, "group_id")}


def guarantee(spec: Spec) -> str:
    """What m-Distinct protects (Li-Zhou Def. 15), in one sentence, for the UI."""
    m = spec.model.params["m"]
    return (f"m-Distinct (Li & Zhou), m = {m}: every published group holds {m} distinct values of {spec.sensitive}, "
            f"and across releases a person's group stays consistent with the declared update sets, so the values "
            f"they may hold never narrow below {m}, updates included")


MODEL = ModelDescriptor(
    name="m_distinct",
    paper="Li & Zhou, m-Distinct (§IV Defs. 12-15, §V Algorithms 1-3: create buckets, assign records, split)",
    params={
        "m": Param(int, minimum=2, help="every group has m records with pairwise different sensitive values"),
        "update_sets": Param(dict, default={}, check=check_update_sets,
                             help="candidate update set of every sensitive value: {value: [values it may become]}; "
                                  "a value not listed can only stay itself"),
        "strict": Param(bool, default=False),
    },
    publish=publish,
    verify=verify_m_distinct,
    bound=lambda params: Bound(values=int(params["m"]), tuples=int(params["m"])),
    diversity_param="m",
    reads="previous",
    previous_columns=previous_columns,
    check_spec=check_spec,
    returning=True,
    guarantee=guarantee,
    skipped_attacks={
        name: "it assumes a sensitive value never changes across releases; m_distinct publishes internal updates "
              "(Li-Zhou Defs. 1-2), whose adversary is the SUG attack (§III), run instead"
        for name in ("intersection", "equivalence")
    },
)

#: What this module registers (``registry.BUILTIN``).
MODELS = (MODEL,)
