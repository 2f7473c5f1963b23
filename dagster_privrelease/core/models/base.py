"""What a model declares about itself: one ``ModelDescriptor``, registered once (``core.models.registry.register``).

Everything outside the model's own module asks the descriptor: the spec (parameters and their rules), the
pipeline (how to publish, what of the past to read, what the judge runs and whether attacks block), the storage
(nothing model-specific: private state is opaque frames), the Dagster layer (extra assets, vertical release
requests) and the CLI. Adding a model is its module plus one ``register`` call; nothing else changes.

This module is pure: no Dagster, no DuckDB.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ...errors import SpecError

if TYPE_CHECKING:
    import pandas as pd

    from ..judge.history import Bound, History, Report
    from ..release import Release
    from ..spec import BoundSpec, Spec


#: ``publish(snapshot, spec, previous, rng, **prepared) -> Release``.
#:
#: ``snapshot``: T(n), validated and normalised (``spec.validate_snapshot``); ``spec``: the ``BoundSpec`` (stored
#: domains and T(n)), restricted to the release's attributes; ``previous``: what the model may read of the past
#: (``ModelDescriptor.reads``), None for the first release; ``rng``: the release's generator
#: (``release.release_rng``), the only randomness; ``prepared``: the frames each of the model's stages
#: (``ModelDescriptor.stages``) made for this release, as keyword arguments named after the stages (a model
#: without stages takes none).
Publisher = Callable[..., "Release"]


@dataclass(frozen=True)
class Param:
    """A model parameter as the spec writes it: ``Param(int, minimum=2, help=...)``.

    Everything but ``kind`` is a keyword, so a bound never reads as a default.

    Attributes:
        kind: the YAML type (int, float, bool, str, dict or list).
        minimum: the least value of a number; None for none.
        default: the value when the spec omits the key; None makes the key required.
        choices: the allowed values; None for any.
        maximum: the greatest value of a number; None for none.
        help: what the parameter means, quoted when it is missing.
        check: an extra rule on the value, ``check(key, value)``, raising ``SpecError`` naming ``model.<key>``.
    """

    kind: type
    _: KW_ONLY
    minimum: float | None = None
    default: Any = None
    choices: tuple | None = None
    maximum: float | None = None
    help: str = ""
    check: Callable[[str, Any], None] | None = None

    def validate(self, model: str, key: str, value: Any) -> Any:
        """``value`` checked against this parameter; SpecError naming ``model.<key>`` and the rule."""
        if value is None:
            raise SpecError(f"model.{key}: {model} needs the parameter {key!r}" + (f" ({self.help})" if self.help
                                                                                     else ""))
        if self.kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise SpecError(f"model.{key}: expected an integer, got {value!r}")
        if self.kind is float and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise SpecError(f"model.{key}: expected a number, got {value!r}")
        if self.kind is bool and not isinstance(value, bool):
            raise SpecError(f"model.{key}: expected true or false, got {value!r}")
        if self.kind is str and not isinstance(value, str):
            raise SpecError(f"model.{key}: expected a string, got {value!r}")
        if self.kind in (dict, list) and not isinstance(value, self.kind):
            raise SpecError(f"model.{key}: expected a {'mapping' if self.kind is dict else 'list'}, got {value!r}")
        if self.minimum is not None and isinstance(value, int | float) and value < self.minimum:
            raise SpecError(f"model.{key}: must be at least {self.minimum:g}, got {value!r}")
        if self.maximum is not None and isinstance(value, int | float) and value > self.maximum:
            raise SpecError(f"model.{key}: must be at most {self.maximum:g}, got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise SpecError(f"model.{key}: must be one of {list(self.choices)}, got {value!r}")
        if self.check is not None:
            self.check(key, value)
        return value


@dataclass(frozen=True)
class PermutationView:
    """A readable shape of a stage's state that maps, per world and individual, the individual to the tuple of T
    whose sensitive value it takes in that world (a compact permutation, as Shmueli-Tassa eq. (5) stores the
    fake possible worlds).

    The store shows it as ``private.<view>(world, <id>, <sensitive>)`` for the latest release holding the state:
    world 0 every individual's own value in T, each world of the state the value of the tuple its ``source``
    column names. The SQL is the store's (``storage.schema.permutation_view_sql``).

    Attributes:
        source: the state's column naming that tuple, from the bound spec.
    """

    source: Callable[[BoundSpec], str]


@dataclass(frozen=True)
class Stage:
    """A step a model needs before its candidate, materialised on its own (in Dagster: an asset between
    ``snapshot`` and ``release_candidate``), e.g. the possible-world set of Shmueli-Tassa Alg. 1.

    ``run(snapshot, spec, previous, rng)`` returns private frames by name, one of them named after the stage
    (the pipeline checks that it ran by that name); the store keeps them with the release (``private.candidate_state_<name>``, then ``private.state_<name>`` once published) and the model's
    ``publish`` receives them as keyword arguments. They never leave the private schema.

    ``views``: readable shapes of the stage's state, view name -> ``PermutationView``; the store creates
    ``private.<view>`` once ``private.state_<name>`` exists (e.g. ``private.possible_world`` over the compact
    worlds of eq. (5)). Views stay in the private schema.
    """

    name: str
    description: str
    run: Callable[..., dict[str, pd.DataFrame]]
    views: Mapping[str, PermutationView] = field(default_factory=dict)


#: The private state frame in which a model lists, by id, the new tuples a release holds back (m-invariance's
#: ``hold_back``): they are in T(j) but not published with release j; the pipeline counts them and the judge's
#: ``judged`` view leaves them out of T(j).
HELD_BACK = "held_back"

#: What of the past a model reads for release n: nothing (single-release baselines), release n-1 and its
#: private side (Xiao-Tao Lemma 4), or every published release (the star join of Wang-Fung §7).
Reads = Literal["nothing", "previous", "all"]

#: The parts of ``release.PreviousRelease`` whose columns a model may narrow (``ModelDescriptor.previous_columns``).
PreviousPart = Literal["snapshot", "table", "counterfeits", "hosting"]


@dataclass(frozen=True)
class ModelDescriptor:
    """Everything the rest of the package needs to know about one model.

    name:             ``model.name`` in the spec.
    paper:            the paper and section it implements (a citation for readers, as its page under
                      ``docs/models/`` gives it; no code reads it).
    params:           its parameters (``Param``), validated when the spec is loaded.
    publish:          the algorithm (``Publisher``).
    verify:           the judge's verifiers of its guarantee over a history (publisher side included).
    bound:            what it promises against the attacks, from its parameters (``history.Bound``).
    across_releases:  True when it protects a sequence of releases, so a disclosing attack blocks publication;
                      False for the single-release baselines, whose attacks are reported, never blocking.
    skipped_attacks:  attacks whose adversary does not apply to the model's data, with the reason (reported as
                      skipped, never run): e.g. the intersection attack assumes a sensitive value never changes,
                      while m-Distinct publishes internal updates, whose adversary is the SUG attack (Li-Zhou §III).
    vertical:         True when a release may publish a subset of the quasi-identifiers (a release request).
    reads:            what of the past ``publish`` reads (``Reads``); the store reads no more than that.
    previous_columns: for ``reads == "previous"``, the columns ``publish`` reads of each part of release n-1
                      (``PreviousPart`` -> column names, from the bound spec: e.g. m-invariance reads the id and
                      the sensitive value of T(n-1), the group and the sensitive value of T*(n-1)); the store reads
                      only those (``StoreReader.previous``), a part left out is read whole. None: every column of
                      every part. The read costs O(rows of release n-1 x columns named), since DuckDB stores
                      columns apart.
    diversity_param:  the parameter that cannot exceed the number of distinct sensitive values (m, l), refused
                      when the spec is loaded or bound.
    judged:           how the model's private state changes what the judge sees (``History -> History``), e.g.
                      m-invariance's held-back tuples, which are not in the published T(j); None: as stored.
    check_spec:       extra rules on the whole spec (e.g. update sets naming sensitive values); SpecError.
    stages:           steps materialised before the candidate (``Stage``), e.g. the possible-world set.
    returning:        True when ``publish`` reads the last appearance of each tuple that comes back after an
                      absence (``PreviousRelease.returning``), as m-invariance does; with ``reads == "previous"``.
    guarantee:        what the model protects, in one sentence naming the model, its paper's authors and its
                      parameters, from the spec (e.g. "m-invariance (Xiao & Tao), m = 4: ..."); the Dagster layer
                      shows it as the table's asset descriptions (``describe``). None: the model's name and
                      parameters only.

    Example:
        ```python
        import numpy as np
        from dagster_privrelease import Bound, ModelDescriptor, Param, build_release, register
        from dagster_privrelease.core.judge.verifiers import verify_k_anonymity

        register(ModelDescriptor(
            name="one_group",
            paper="none: an example",
            params={"k": Param(int, minimum=2, help="the fewest rows of the one group")},
            publish=lambda snapshot, spec, previous, rng: build_release(
                snapshot, np.ones(len(snapshot), dtype=np.int64), spec, rng),
            verify=verify_k_anonymity,
            bound=lambda params: Bound(values=2, tuples=int(params["k"])),
            reads="nothing",
        ))
        ```
    """

    name: str
    paper: str
    params: Mapping[str, Param]
    publish: Publisher
    verify: Callable[[History], list[Report]]
    bound: Callable[[Mapping[str, Any]], Bound]
    across_releases: bool = True
    skipped_attacks: Mapping[str, str] = field(default_factory=dict)
    vertical: bool = False
    reads: Reads = "previous"
    previous_columns: Callable[[BoundSpec], Mapping[PreviousPart, Sequence[str]]] | None = None
    diversity_param: str | None = None
    judged: Callable[[History], History] | None = None
    check_spec: Callable[[Spec], None] | None = None
    stages: tuple[Stage, ...] = field(default=())
    returning: bool = False
    guarantee: Callable[[Spec], str] | None = None

    def describe(self, spec: Spec) -> str:
        """The one sentence of ``guarantee`` for ``spec`` (whose model is this one), or the model's name and
        parameters when the model declares none."""
        if self.guarantee is not None:
            return self.guarantee(spec)
        params = ", ".join(f"{k} = {v}" for k, v in spec.model.params.items())
        return f"{self.name} ({params})" if params else self.name

    def parse_params(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The model's parameters from the spec's ``model`` mapping (``name`` excluded), defaults filled in.
        SpecError naming ``model.<key>`` for an unknown, missing or invalid parameter."""
        unknown = sorted(set(raw) - {"name"} - set(self.params))
        if unknown:
            raise SpecError(f"model: unknown parameter(s) {unknown} for {self.name}; its parameters are "
                            f"{sorted(self.params)}")
        return {key: param.validate(self.name, key, raw.get(key, param.default)) for key, param in self.params.items()}
