"""Initial synthesis spaces (App. B.1), each a domain pack's data file, loaded into ``SynthesisSpace`` v1."""
from __future__ import annotations

from typing import Iterable

from evosyn.envs.packs import DomainPack
from evosyn.envs.properties import PROPERTIES
from evosyn.storage.records import Factor, SynthesisSpace

# Factors the verifier can measure on a realized trajectory (envs/factors.py): every trajectory property too.
OBSERVABLE = {"computation", "state_change_type", "trajectory_pattern", *PROPERTIES}


class SpaceError(ValueError):
    pass


def validate_space(space: SynthesisSpace) -> SynthesisSpace:
    keys = [f.key for f in space.factors]
    if len(set(keys)) != len(keys):
        raise SpaceError(f"space v{space.version}: duplicate factor keys in {keys}")
    for f in space.factors:
        if len(set(f.values)) != len(f.values):
            raise SpaceError(f"space v{space.version}: factor {f.key!r} repeats a value")
        if f.cardinality.min > f.cardinality.max or f.cardinality.max > len(f.values):
            raise SpaceError(f"space v{space.version}: factor {f.key!r} has cardinality "
                             f"{f.cardinality.min}..{f.cardinality.max} over {len(f.values)} values")
    for key, allowed in space.restrictions.items():
        factor = space.factor(key)
        unknown = sorted(set(allowed) - set(factor.values))
        if unknown:
            raise SpaceError(f"space v{space.version}: restriction on {key!r} names unknown values {unknown}")
    return space


def load_initial_space(pack: DomainPack, run_id: str = "none", round: int = 0, extra: Iterable[str] = ()
                       ) -> SynthesisSpace:
    """The pack's initial space; ``extra`` (``RunConfig.initial_factors``) adds controllable properties of the
    domain's generator as standard factors of v1 (checked by ``check_initial_factors``)."""
    domain = pack.name
    raw = pack.initial_space()
    factors = [_factor(n, f) for n, f in enumerate(_factors(raw))]
    extra = list(extra)
    check_initial_factors(extra, pack)
    factors += [Factor(key=k, values=list(pack.controllable[k]), status="standard", observable=k in OBSERVABLE,
                       added_in=1, guidance=f"in the initial space by the run's config (initial_factors): the "
                                            f"{domain} generator's {k}") for k in extra]
    space = SynthesisSpace(run_id=run_id, round=round, space_version=1, domain=domain, version=1,
                           factors=factors, restrictions=raw.get("restrictions", {}))
    return validate_space(space)


# The factors the core reads by name: the Designer's cold start crosses the families with a second factor
REQUIRED = "task_family"
EXAMPLE = "(`evosyn new-domain` writes an example)"


def _factors(raw: object) -> list:
    """``ontology.json``'s factor list, with what the Designer needs of it: ``SpaceError`` (one line naming the
    field and the fix) otherwise."""
    if not isinstance(raw, dict) or not isinstance(raw.get("factors"), list):
        raise SpaceError(f"factors: expected an object with a list of factors under \"factors\" {EXAMPLE}")
    factors = raw["factors"]
    keys = [f.get("key") for f in factors if isinstance(f, dict)]
    if not factors:
        raise SpaceError(f"factors: empty; the Designer needs a {REQUIRED!r} factor (the kinds of request) and at "
                         f"least one other (e.g. expected_outcome: fulfill, refuse) {EXAMPLE}")
    if REQUIRED not in keys:
        raise SpaceError(f"factors: no {REQUIRED!r} factor (the kinds of request the Designer spreads the budget "
                         f"over, named by the pack's family_by_tool); add one {EXAMPLE}")
    if len(factors) < 2:
        raise SpaceError(f"factors: only {REQUIRED!r}; the Designer crosses it with a second factor (e.g. "
                         f"expected_outcome: fulfill, refuse) {EXAMPLE}")
    return factors


def _factor(n: int, raw: object) -> Factor:
    """One factor of ``ontology.json``; ``SpaceError`` naming it (its position and key) and the field."""
    from pydantic import ValidationError

    key = raw.get("key") if isinstance(raw, dict) else None
    name = f"factors[{n}]" + (f" ({key!r})" if isinstance(key, str) else "")
    if not isinstance(raw, dict):
        raise SpaceError(f"{name}: expected an object with key, values, guidance, status, cardinality")
    try:
        return Factor(**raw, observable=key in OBSERVABLE, added_in=1)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(map(str, first["loc"])) or "factor"
        fix = " (give it at least one value, or remove the factor)" if field == "values" else ""
        raise SpaceError(f"{name}: {field}: {first['msg']}{fix}") from None
    except TypeError as exc:  # a field given twice (observable, added_in are the loader's)
        raise SpaceError(f"{name}: {exc}") from None


def check_initial_factors(names: list[str], pack: DomainPack) -> None:
    """``RunConfig.initial_factors`` names controllable properties of the pack's generator that the initial
    space does not have, each once (one ``ConfigError`` line naming the field otherwise), before any work."""
    if not names:  # the pack's space: nothing to read or check
        return
    from evosyn.storage.userfiles import ConfigError

    domain = pack.name
    seed = {f["key"] for f in pack.initial_space()["factors"]}
    for name in names:
        if name not in pack.controllable:
            raise ConfigError(f"initial_factors: the {domain} generator does not control {name!r} "
                              f"(it controls: {', '.join(pack.controllable) or 'nothing'})")
        if name in seed or names.count(name) > 1:
            why = "already in the initial space" if name in seed else "named twice"
            raise ConfigError(f"initial_factors: {name!r} is {why}; name it once, or drop it")


def check_selection(space: SynthesisSpace, selection: dict[str, Iterable[str]]) -> list[str]:
    """Problems with a blueprint's selected values under the space's cardinality rules."""
    problems = []
    active = {f.key: f for f in space.active}
    for key, values in selection.items():
        values = list(values)
        if key not in active:
            problems.append(f"factor {key!r} is not in space v{space.version}")
            continue
        f = active[key]
        bad = [v for v in values if v not in f.values]
        if bad:
            problems.append(f"{key}: values {bad} are not in {f.values}")
        allowed = space.restrictions.get(key)
        if allowed and any(v not in allowed for v in values):
            problems.append(f"{key}: values {values} break the restriction to {allowed}")
        if not f.cardinality.min <= len(values) <= f.cardinality.max:
            problems.append(f"{key}: needs {f.cardinality.min}..{f.cardinality.max} values, got {len(values)}")
    for key, f in active.items():
        if key not in selection and f.cardinality.min > 0:
            problems.append(f"{key}: missing (needs at least {f.cardinality.min} value)")
    return problems
