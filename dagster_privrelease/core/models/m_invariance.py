"""m-invariance: re-publication of a table under insertions and deletions (Xiao & Tao, SIGMOD 2007).

A sequence of releases T*(1), ..., T*(n) is m-invariant (Def. 17) when every release is m-unique (each QI group
has at least m tuples with pairwise different sensitive values) and every tuple's generalised hosting groups
have the same *signature* (Def. 16: the set of sensitive values of the group, counterfeits included) in all the
releases it appears in. Then an adversary holding the background knowledge B(n) of Def. 6 (every QI value,
every lifespan, the counterfeit counts R(j)) infers no sensitive value with probability above 1/m (Lemma 3).

By Lemma 4 release n needs only T(n-1), T*(n-1) and the hosting groups: ``publish`` reads nothing older, and
its cost does not grow with n. The algorithm is the counterfeited generalisation of §4.1:

1. **Division**: S∩ = T(n) ∩ T(n-1) is divided into *buckets* by signature (a tuple's signature is that of its
   generalised hosting group in T*(n-1)).
2. **Balancing**: a bucket is balanced when every value of its signature has the same number of tuples; a
   shortage is filled with new tuples of S− = T(n) − T(n-1) while S− stays m-eligible, otherwise with
   *counterfeits* (a sensitive value and no QI values).
3. **Assignment** (Fig. 3): the rest of S− goes to buckets whose signature is the β most frequent values of
   the current S−, α tuples per value, α and β from inequalities 5-7; by Lemma 5 this always succeeds when
   S− is m-eligible.
4. **Split** (§4.3): every balanced bucket is halved recursively into QI groups of exactly s tuples (s the
   signature size); each cut is the least perimeter sum among the cuts of the per-value lists sorted along
   every QI.

The groups are generalised by ``release.build_release`` (boxes from genuine tuples only, numeric intervals
widened to ``min_width`` as §4.1 asks) and R(n) counts the counterfeits per group. A categorical QI is
generalised as footnote 1 of §2 says: its values are ordered as the taxonomy's leaves from left to right and a
group publishes the *minimum interval* of its leaves (model parameter ``categorical: interval``, the default),
which is what the split of §4.3 minimises. ``categorical: node`` publishes the smallest taxonomy node covering
that interval instead, for consumers that need taxonomy values; it can be much wider (on Census-KDD, education
groups span 15.6 of 17 leaves as nodes against 5.3 as intervals) and the median query error of §5.2 is about
three times higher (``make bench``). Group ids are numbered 1..g in the order of the groups' lower corners (Table 3a's
numbering). The first release (model parameter ``first_release``) is by default the same algorithm with S∩
empty (``counterfeited``: assignment and split of all tuples), as the experiments of §5.2 compute every T*(j)
with it: its few, large buckets (one per signature of Fig. 3) absorb later deletions evenly. ``mondrian`` takes
Mondrian's m-unique partition instead (``kernels.partition.partition(unique=True)``; any m-unique T*(1) starts an
m-invariant history): tighter first groups, but nearly every group has its own signature, so later deletions
leave shortages almost everywhere and cost far more counterfeits (``make bench``).

**Publishability** (§4.1): release n is allowed only when S− is m-eligible (no sensitive value in more than 1/m
of the new tuples). Otherwise ``publish`` raises ``NotPublishable`` naming the over-represented values, by how
much, and what would fix it. With the model parameter ``hold_back: true`` it instead *holds back* the fewest
new tuples that make the published S− m-eligible (the surplus of the over-represented values, chosen at
random with the release's generator). Held-back tuples are left out of T*(n) entirely (no row, no hosting
group) and listed in ``Release.state["held_back"]``; while they stay in the source they are new tuples of
every later release until one can take them. What this guarantees: the published history is exactly the
m-invariant history of a table into which those tuples were inserted later, so Lemma 3's bound 1/m holds for
an adversary whose lifespans (Def. 6) are the published ones. An adversary who knows a held-back tuple's true
insertion time learns only that it was held back, i.e. that its value was over-represented among that
release's insertions (at most m - 1 values can be); the value itself is protected by the group the tuple is
finally published in.

Updates of a tuple's sensitive value are outside this model (the m-Distinct model handles them) and are
refused; changes of QI values are allowed (the tuple keeps its signature; its new values are generalised).
A lifespan [x, y] runs from a tuple's first release to its last (Def. 5), absences included, and Def. 17 holds its
signature over all of it: a tuple that comes back after an absence is bound to the signature of the group that
last hosted it, as a tuple of S∩ is to its group of T*(n-1) (``previous_signatures``; the store reads the last
appearance of the returning tuples only, ``ModelDescriptor.returning``, so the cost still does not grow with n
beyond a semi-join of the hosting table with the new ids).

The phases m-Distinct and sequential l-diversity share are kernels of their own: division, balancing and
assignment in ``kernels.buckets``, the split in ``kernels.split``, the last hosting groups in ``kernels.hosts``.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import numpy as np
import pandas as pd

from ...errors import NotPublishable
from ..encoding import encode, sensitive_codes
from ..judge import verifiers as verify
from ..judge.history import Bound, History
from ..partitioned import Seeds, apply, current
from ..progress import step
from ..release import PreviousRelease, Release, build_release
from ..spec import BoundSpec, Spec
from .base import HELD_BACK, ModelDescriptor, Param, PreviousPart
from .kernels.buckets import buckets_of, hold_back_mask, refuse_unless_eligible
from .kernels.hosts import last_groups
from .kernels.partition import domain_widths, partition
from .kernels.split import normalised, number_groups, rank_codes, split_buckets, split_columns


def publish(snapshot: pd.DataFrame, spec: BoundSpec, previous: PreviousRelease | None, rng: np.random.Generator) -> Release:
    """Model ``m_invariance``: T*(n) and R(n) of the validated ``snapshot`` T(n) under the bound ``spec``.

    ``previous``: release n-1 (T(n-1), T*(n-1), hosting; Lemma 4), None for the first release. Raises
    NotPublishable when the new tuples are not m-eligible and ``hold_back`` is off (module docstring), when a
    tuple of T(n-1) changed its sensitive value, or when T*(n-1) has a group of fewer than m values. With
    ``hold_back`` on, ``Release.state["held_back"]`` (one column, the id) lists the new tuples held back.
    Deterministic given ``rng``. Cost O(|T(n)| log |T(n)|) per level of the split recursion, independent of n.
    Its phases are reported as steps (``core.progress``): ``previous signatures``, ``buckets`` (§4.2's division,
    balancing and assignment), ``split on <backend>`` (§4.3: each balanced bucket, its counterfeits with it, one
    partition of ``core.partitioned``, run on the current backend), ``release table``.
    """
    m = int(spec.model.params["m"])
    hold_back = bool(spec.model.params.get("hold_back", False))
    codes = sensitive_codes(snapshot, spec)
    V = len(spec.sensitive_values)
    if previous is None:
        prev_group = np.full(len(snapshot), -1, dtype=np.int64)
        signatures = np.zeros((0, V), dtype=bool)
    else:
        with step("previous signatures"):
            prev_group, signatures = previous_signatures(snapshot, spec, previous)
    new = prev_group < 0
    if hold_back:
        held = hold_back_mask(codes, new, m, spec, rng)
    else:
        refuse_unless_eligible(codes[new], m, spec)
        held = np.zeros(len(snapshot), dtype=bool)
    state = {HELD_BACK: snapshot.loc[held, [spec.id]].reset_index(drop=True)} if hold_back else {}
    if held.all():
        raise NotPublishable(
            f"every one of the {len(snapshot)} tuples would be held back (the new tuples have fewer than m={m} "
            f"sensitive values in proportions that can be m-eligible); nothing to publish"
        )
    if held.any():
        keep = ~held
        snapshot, codes, prev_group = snapshot[keep].reset_index(drop=True), codes[keep], prev_group[keep]
    X = encode(snapshot, spec)
    widths = domain_widths(X, spec)
    categorical = spec.model.params.get("categorical", "interval")
    if previous is None and spec.model.params.get("first_release") == "mondrian":
        groups = partition(X, codes, k=m, unique=True, scale=widths)
        groups, _ = number_groups(X, groups, np.zeros(0, dtype=np.int64))
        return build_release(snapshot, groups, spec, rng, state=state, categorical=categorical, X=X)
    with step("buckets"):
        buckets, fake_buckets, fake_values = buckets_of(codes, prev_group, signatures, m, V, rng)
    del prev_group
    backend = current()
    with step(f"split on {backend.name}"):
        # the normalised matrix is an expression, not a name: freed once ranked (10M rows: 560 MB)
        ranks, table = rank_codes(normalised(X, spec, widths, counterfeits=len(fake_values)))
        release = previous.release_id + 1 if previous is not None else 1  # ids run 1, 2, ... (Lemma 4's n)
        labels = apply(partial(split_buckets, table=table), np.concatenate([buckets, fake_buckets]),
                       split_columns(ranks, np.concatenate([codes, fake_values])), Seeds(spec.seed, release),
                       backend)
    del buckets, fake_buckets, ranks
    with step("release table"):
        groups, fake_groups = labels[: len(X)], labels[len(X):]
        groups, fake_groups = number_groups(X, groups, fake_groups)
        values = np.asarray(spec.sensitive_values, dtype=object)
        counterfeits = pd.DataFrame({"group_id": fake_groups, spec.sensitive: values[fake_values]})
        return build_release(snapshot, groups, spec, rng, counterfeits=counterfeits, state=state,
                             categorical=categorical, X=X)


def previous_signatures(
    snapshot: pd.DataFrame, spec: BoundSpec, previous: PreviousRelease
) -> tuple[np.ndarray, np.ndarray]:
    """The group that last hosted every tuple of T(n) (``last_groups``), and the signature of every such group.

    Returns ``(prev_group, signatures)``: ``prev_group[i]`` indexes the rows of ``signatures`` (-1 for a new tuple
    of S−, or one held back until now); ``signatures`` is a (groups, V) bool matrix, V =
    ``len(spec.sensitive_values)``, from the published rows, counterfeits included (Def. 16). A tuple coming back
    after an absence is bound to the signature of the group that last hosted it, as a tuple of S∩ is to its group
    of T*(n-1): Def. 17 asks one signature over the whole lifespan [x, y], and B(n) (Def. 6) tells the adversary
    the lifespan. Raises NotPublishable when such a tuple changed its sensitive value or a signature has fewer
    than m values. Cost: that of ``last_groups``.
    """
    m = int(spec.model.params["m"])
    last = last_groups(snapshot, spec, previous)
    seen = last.host >= 0
    _refuse_changed(last.was[seen], snapshot[spec.sensitive].astype(str).to_numpy()[seen], spec)
    signatures = np.zeros((len(last.group_ids), len(spec.sensitive_values)), dtype=bool)
    signatures[last.row_group, last.codes] = True
    small = np.flatnonzero(signatures.sum(axis=1) < m)
    if len(small):
        raise NotPublishable(
            f"group {int(last.group_ids[small[0]])} of release {int(last.release_ids[small[0]])} has a signature "
            f"of {int(signatures[small[0]].sum())} value(s), fewer than m={m}; m-invariance cannot raise m on a "
            f"running history (Def. 17): keep m at most the previous release's m"
        )
    return last.host, signatures


def _refuse_changed(was: np.ndarray, now: np.ndarray, spec: BoundSpec) -> None:
    """NotPublishable, counting the tuples and naming no one, when a tuple's sensitive value ``now`` differs
    from the one it had when last published (``was``; text, in the same row order): m-invariance covers
    insertions and deletions only (Xiao-Tao §2)."""
    changed = int(np.count_nonzero(was != now))
    if changed:
        raise NotPublishable(
            f"{changed} tuple(s) changed their sensitive value {spec.sensitive!r} since they were last published; "
            "m-invariance covers insertions and deletions only (Xiao-Tao §2): delete such a tuple and insert it "
            "again under a new id, or publish the table with the m_distinct model in a new store"
        )


def previous_columns(spec: BoundSpec) -> dict[PreviousPart, tuple[str, ...]]:
    """The columns of release n-1 that ``publish`` reads (``ModelDescriptor.previous_columns``): the id and the
    sensitive value of T(n-1) (a tuple of S∩ must keep its value), the group and the sensitive value of T*(n-1)
    (the signatures, Def. 16) and the hosting groups; nothing else of Lemma 4's T(n-1), T*(n-1)."""
    return {"snapshot": (spec.id, spec.sensitive), "table": ("group_id", spec.sensitive),
            "hosting": (spec.id, "group_id")}


def judged(history: History) -> History:
    """The history as the judge reads it: the tuples a release held back (``state["held_back"]``, module
    docstring) are not in that release's T(j), so their judged lifespan starts when a release publishes them,
    which is what ``hold_back`` guarantees against."""
    held = history.states.get(HELD_BACK)
    if held is None or not len(held) or history.snapshots is None:
        return history
    ident = history.spec.id
    snapshots = history.snapshots
    keys = pd.MultiIndex.from_frame(snapshots[["release_id", ident]].astype({"release_id": np.int64}))
    out = keys.isin(pd.MultiIndex.from_frame(held[["release_id", ident]].astype({"release_id": np.int64})))
    return dataclasses.replace(history, snapshots=snapshots[~out].reset_index(drop=True))


def guarantee(spec: Spec) -> str:
    """What m-invariance protects (Xiao-Tao Def. 4), in one sentence, for the UI."""
    m = spec.model.params["m"]
    return (f"m-invariance (Xiao & Tao), m = {m}: every published group holds at least {m} distinct values of "
            f"{spec.sensitive}, and a person keeps their group's signature in every release they appear in")


MODEL = ModelDescriptor(
    name="m_invariance",
    paper="Xiao & Tao, m-invariance, SIGMOD 2007 (§4: counterfeited generalisation)",
    params={
        "m": Param(int, minimum=2, help="every group has m tuples with pairwise different sensitive values"),
        "hold_back": Param(bool, default=False),
        "categorical": Param(str, default="interval", choices=("interval", "node")),
        "first_release": Param(str, default="counterfeited", choices=("counterfeited", "mondrian")),
    },
    publish=publish,
    verify=verify.verify_m_invariance,
    bound=lambda params: Bound(values=int(params["m"]), tuples=int(params["m"])),
    diversity_param="m",
    judged=judged,
    previous_columns=previous_columns,
    returning=True,
    guarantee=guarantee,
)

#: What this module registers (``registry.BUILTIN``).
MODELS = (MODEL,)
