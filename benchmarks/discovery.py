"""`evosyn bench discovery`: planted-gap recovery, the adopted-factor recovery of App. B.6.

A planted gap is a prior of the embedded generator (``RunConfig.prior.suppress``) that keeps plans in one
bucket of one controllable property only with probability ``keep`` while the space does not select that
property: the default synthesis then rarely shows it (e.g. writes that carry two or more items). For each
gap, the evosyn arm and the no_feedback control run on the same seeds (``benchmarks/learning.py``'s runner:
same config but the arm, stop rule off), and we count, per arm, the seeds in which the planted property is
adopted: the Reflector promotes it to a factor of the space in a round whose reflection steers a later round
(rounds 1 .. R-1; a promotion after the last round shapes no data and is listed, not counted), with the round
and the rule (failure-driven, coverage-gap-driven, or the control's evidence-free draw).

The gaps are fixed before any run, from the domain's controllable properties (``DEFAULT_GAPS``, in order,
the first three the domain's generator controls, then the top bucket of each other controllable property not
in the runs' initial space: ``gaps_for``); ``--gap PROPERTY=BUCKET`` names others. ``--writes even``
plants them on even write counts instead of the default prior's (whose few multi-write tasks are a gap of
their own, in front of the planted one: ``benchmarks/discovery_gaps.py`` measured it). ``--space paper``
starts every run from the initial space plus num_write and num_read (``RunConfig.initial_factors``), so the
gaps are planted beyond the natural difficulty axes the learner exposes first; ``--factor NAME`` adds another
controllable property to that space (a domain's own natural gap, so the planted ones lie beyond it too).
"""
from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from evosyn.benchmarks.learning import Plan, launch

if TYPE_CHECKING:
    from evosyn.envs.base import Domain

# (property, suppressed bucket), in order of preference; a domain takes the first three its generator controls
DEFAULT_GAPS = [("multi_item", "yes"), ("entities_touched", "3+"), ("money_moves", "2+"), ("write_mix", "mixed"),
                ("distinct_tools", "4+"), ("policy_gated", "2+")]
ARMS = ["evosyn", "no_feedback"]
# the background the gap is planted on (`--writes`): the generator's default write counts of a fulfilment
# (mostly one write, so 3+ writes are a gap of their own), or even ones (uniform over the num_write buckets
# 1 / 2 / 3-4 / 5+), where the planted bucket is the one gap planted
WRITES = {"default": None, "even": {1: 0.25, 2: 0.25, 3: 0.125, 4: 0.125, 5: 0.25}}
# the space the runs start from (`--space`): the pack's initial space, or it plus the two factors the paper's
# Reflector adopted (App. B.6: num_write after R1, num_read after R2), so that the natural difficulty axes the
# learner exposes first are in the space from round 1 (evenly allocated by the Designer, and part of the
# stratum O_r the probes condition on) and a planted gap is the one weakness beyond the space
SPACES = {"initial": [], "paper": ["num_write", "num_read"]}


class GapError(ValueError):
    """A --gap that the domain's generator cannot plant (one line, naming it)."""


def gaps_for(env: Domain, named: list[str] | None = None, count: int = 3, space: tuple[str, ...] = ()
             ) -> list[tuple[str, str]]:
    """The planted gaps: ``named``, else the first ``count`` of ``DEFAULT_GAPS`` the domain's generator
    controls, then (a generator that controls none of those, e.g. only write and read counts) each other
    controllable property's top bucket, the one a generator's natural tasks show least; never a property in
    the runs' initial space (the pack's, or ``space``: ``--space paper``'s factors), which cannot be
    promoted."""
    pack, domain = env.pack, env.name
    controllable = pack.controllable
    if not named:
        taken = {f["key"] for f in pack.initial_space()["factors"]} | set(space)
        listed = [g for g in DEFAULT_GAPS if g[0] in controllable and g[1] in controllable[g[0]]]
        listed += [(k, v[-1]) for k, v in controllable.items() if v and k not in {p for p, _ in listed}]
        return [g for g in listed if g[0] not in taken][:count]
    out = []
    for text in named:
        prop, _, value = text.partition("=")
        if prop not in controllable:
            raise GapError(f"--gap {text}: the {domain} generator does not control {prop!r} "
                           f"(it controls: {', '.join(controllable)})")
        if value not in controllable[prop]:
            raise GapError(f"--gap {text}: {value!r} is not a bucket of {prop} ({', '.join(controllable[prop])})")
        out.append((prop, value))
    return out


def check_factors(env: Domain, factors: list[str], gaps: list[tuple[str, str]]) -> tuple[str, ...]:
    """``--factor`` names: properties the domain's generator controls, none of them a planted gap's (a factor in
    the space from round 1 cannot be promoted)."""
    pack, domain = env.pack, env.name
    controllable, seed = pack.controllable, {f["key"] for f in pack.initial_space()["factors"]}
    for name in factors:
        if name not in controllable:
            raise GapError(f"--factor {name}: the {domain} generator does not control {name!r} "
                           f"(it controls: {', '.join(controllable)})")
        if name in seed:
            raise GapError(f"--factor {name}: it is already in the {domain} initial space; drop it")
        if any(name == prop for prop, _ in gaps):
            raise GapError(f"--factor {name}: it is a planted gap's property; a factor in the space from round 1 "
                           "cannot be promoted (drop the --factor or the --gap)")
    return tuple(sorted(set(factors)))  # sorted: the runs' configs (and ids) do not depend on the flags' order


def _promotions(store, run_id: str) -> list[dict]:
    """Each factor the run's Reflector added: round, factor, rule (failure-driven, coverage-gap, evidence-free)."""
    out = []
    for r in sorted(store.read_records("reflections", run_id=run_id), key=lambda r: r.round):
        for p in r.new_proposals:
            if p.action == "promote_probe_to_dimension":
                out.append({"round": r.round, "factor": p.dimension_name, "rule": p.reason})
    return out


def adoption(store, launched, arms: list[str], prop: str, rounds: int) -> list[dict[str, Any]]:
    """Per arm, the seeds whose runs (``launched``) adopt ``prop``: promoted by a reflection of rounds
    1 .. ``rounds``-1 (one that steers a later round; the last one shapes no data), with the round and the rule, and
    every factor each run promoted."""
    rows = []
    for arm in arms:
        per_seed = []
        for j in (j for j in launched if j.arm == arm):
            promoted = _promotions(store, j.run_id)
            hit = next((p for p in promoted if p["factor"] == prop and p["round"] < rounds), None)
            per_seed.append({"seed": j.seed, "run_id": j.run_id, "recovered": hit is not None,
                             "round": hit["round"] if hit else None, "rule": hit["rule"] if hit else None,
                             "promoted": promoted})
        rows.append({"arm": arm, "recovered": sum(s["recovered"] for s in per_seed), "seeds": len(per_seed),
                     "per_seed": per_seed})
    return rows


def weakness(rows: list[dict], gap: str) -> dict[str, Any]:
    """Whether suppressing the planted bucket made it a weakness of the feedback arm's learner: in how many of the
    diagnosed reflections (the property not yet in the space) the round's model fails the planted bucket of the
    independent uniform sample more often than the property's other buckets. ``weakness``: "yes" (every one),
    "no" (none), "mixed", or None without a diagnosis. Reported beside the adoption counts, which it never
    changes: no evidence can point a Reflector at a bucket its learner does not fail more often in."""
    seen = [x["planted"] for r in rows if r["arm"] == "evosyn" and r["gap"] == gap for s in r["per_seed"]
            for x in s.get("diagnosis", []) if not x["in_space"] and x["planted"]["fail"] is not None
            and x["planted"]["fail_elsewhere"] is not None]
    weaker = sum(d["fail"] > d["fail_elsewhere"] for d in seen)
    label = None if not seen else "yes" if weaker == len(seen) else "no" if weaker == 0 else "mixed"
    return {"weakness": label, "weaker_in": weaker, "diagnosed": len(seen)}


def bench(env: Domain, seeds: list[int], home, *, gaps: list[tuple[str, str]], keep: float = 0.2, rounds: int = 3,
          budget: int = 300, test_size: int = 20, diagnose_size: int = 300, probe_size: int | None = None,
          jobs: int = 2, writes: str = "default", space: str = "initial", factors: tuple[str, ...] = (),
          say=lambda s: None) -> dict[str, Any]:
    """``diagnose_size``: blueprints of the uniform set that ranks each planted bucket among the evosyn runs'
    coverage gaps (``benchmarks/discovery_gaps.py``; 0: no diagnosis). ``probe_size``: the runs'
    ``probe_size`` (a balanced probe set per round for the feedback arm's Reflector; 0: none; None: the runs'
    default, recorded as the number it is). ``writes``: the
    background's write counts (``WRITES``). ``space``: the space the runs start from (``SPACES``), plus ``factors``
    (controllable properties, none of them a planted one: ``check_factors``)."""
    from evosyn.config import default_probe_size
    from evosyn.storage.store import Store

    domain = env.name  # the runs' configs name it
    if probe_size is None:
        probe_size = default_probe_size(budget)
    initial = [*SPACES[space], *(f for f in factors if f not in SPACES[space])]
    t0 = time.perf_counter()
    cpu = 0.0
    rows, runs_launched, runs_reused = [], 0, 0
    for prop, value in gaps:
        plan = Plan(domain=domain, seeds=seeds, home=home, arms=ARMS, rounds=rounds, budget=budget,
                    test_size=test_size, jobs=jobs, extra={"prior": {"suppress": {prop: {value: keep}},
                                                                  **({"writes": WRITES[writes]} if WRITES[writes] else {})},
                                                        "probe_size": probe_size,
                                                        **({"initial_factors": initial} if initial else {})},
                    name="discovery")
        say(f"gap {prop}={value} (kept with probability {keep})")
        launched, spent = launch(plan, say)
        cpu += spent
        runs_launched += sum(not j.reused for j in launched)
        runs_reused += sum(j.reused for j in launched)
        store = Store(home, create=False)
        rows += [{"gap": f"{prop}={value}", "property": prop, "bucket": value, **row}
                 for row in adoption(store, launched, ARMS, prop, rounds)]
    diagnosis = None
    if diagnose_size:
        from evosyn.benchmarks.discovery_gaps import attach

        t1 = time.process_time()
        diagnosis = attach(Store(home, create=False), env, rows, rounds, diagnose_size, say)
        diagnosis["cpu_s"] = time.process_time() - t1
        cpu += diagnosis["cpu_s"]
    n = len(seeds)
    need, allow = math.ceil(2 * n / 3), math.floor(n / 3)  # the acceptance: 2 of 3 with feedback, at most 1 of 3
    verdicts = []
    for prop, value in gaps:
        by_arm = {r["arm"]: r["recovered"] for r in rows if r["property"] == prop}
        verdicts.append({"gap": f"{prop}={value}", "evosyn": by_arm["evosyn"], "no_feedback": by_arm["no_feedback"],
                         "seeds": n, "met": by_arm["evosyn"] >= need and by_arm["no_feedback"] <= allow,
                         **weakness(rows, f"{prop}={value}")})
    return {"domain": domain, "seeds": seeds, "keep": keep, "rounds": rounds, "budget": budget, "jobs": jobs,
            "probe_size": probe_size, "writes": writes, "space": space, "factors": list(factors),
            "initial_factors": initial,
            "gaps": [f"{p}={v}" for p, v in gaps], "rows": rows, "verdicts": verdicts,
            "target": {"evosyn_at_least": need, "no_feedback_at_most": allow}, "diagnosis": diagnosis,
            "runs_launched": runs_launched, "runs_reused": runs_reused, "wall_s": time.perf_counter() - t0,
            "cpu_s": cpu}
