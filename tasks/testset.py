"""The fixed test sets no arm shaped: ``official-matched`` and ``uniform``, per domain and generator version.

Each is built once per store (under ``store_lock``) in a run partition of its
own, ``testset-<kind>-<domain>-g<generator version>-s<seed>-n<size>``, which no
run id can take (run ids start with their domain, synth passes with ``synth-``),
from directions the set writes itself: no Designer, no steering, nothing any arm
learned. Every blueprint runs the round's stages (tasks/stages.py: plan,
generate, rollout, verify) and only verified tasks join the set.

- ``official-matched``: none for a domain without official tasks with gold actions
  (``testset_targets.no_official_reason``: its runs test on the uniform set alone); else ``size`` slots over the joint cells (task family, outcome,
  write count, read count) of tau2's official tasks (tasks/testset_targets.py)
  by largest remainder; each slot's direction fixes its cell, the Planner draws
  the rest (seeded from the set's ids). A slot is filled by a verified task whose
  *observed* cell is the slot's; one that is not is retried with a new salt, at
  most ``MAX_ATTEMPTS`` times. Slots a cell never fills are topped up over the
  cells the generator did realize or no slot tried yet (same allocation, over
  their official mass), so the set reaches its size; the cells it cannot realize are in the report.
  A cell whose family has no realized cell to lend its mass to is asked once more with its read
  count left to the generator (``testset_targets.relaxed``): tau2's gold action lists often leave
  out the lookups (in a dual-control domain every gold may), so no synthetic task shows its
  official read count.
- ``uniform``: uniform over every property the domain's generator controls
  (its pack's ``controllable``), one at a time: slot ``i`` focuses on
  property ``i mod K`` and requests its buckets in turn (so each property's
  slots cover its buckets equally), in a space of the initial factors plus that
  property; the initial space's single-valued factors are drawn uniformly and
  independently per slot with the set's RNG (multi-valued ones by the Planner's
  own uniform sampling), and the other properties are left to the generator.
  (Drawing all K properties jointly asks mostly for combinations no task has,
  such as a multi-item write among zero writes.) An infeasible slot (refused by
  the Planner, the generator or the verifier) keeps its focal request and
  redraws the rest, ``MAX_ATTEMPTS`` times, and is then replaced by fresh slots
  (top-ups, continuing the rotation); the set is its first ``size`` filled
  slots. Its marginals are reported: the generator's feasibility skews them.

The completion marker, written after the last row, holds the set's report (what
it aimed at and what it realized). A build that died part way resumes: every
attempt's directions are a function of the rows already written.
"""
from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from typing import TYPE_CHECKING, Literal

import evosyn.tasks.stages as stages
from evosyn.agents.learners.harness import TaskCase
from evosyn.envs.ontology import load_initial_space
from evosyn.tasks.datasets import cases_for, with_count_factors, with_factors
from evosyn.tasks.stages import Ctx
from evosyn.tasks.testset_targets import (ANY_READS, CELL, Cell, allocate, cell_of, distribution, drawn_keys, in_cell,
                                      marginals, nearest, no_official_reason, official_cells, relaxed, rng_for,
                                      target_of, total_variation, tv_from_uniform, uniform_draw)
from evosyn.storage.locks import store_lock
from evosyn.storage.records import TABLES, Direction, SynthesisSpace, Verdict
from evosyn.storage.store import Store

if TYPE_CHECKING:
    from evosyn.envs.base import Domain

Kind = Literal["official-matched", "uniform"]
KINDS: tuple[Kind, ...] = ("official-matched", "uniform")
TASK_SETS: dict[str, Kind] = {"test": "official-matched", "test_uniform": "uniform"}  # evaluation task_set -> kind
TEST_SEED = 20_260_101
DEFAULT_SIZE = 300
TEST_SET_STAGE = "testset"
TEST_SET_CHUNK_SIZE = 50  # fixed: a set is the same files whatever chunk_size the run that built it had
LEGACY_CHUNK = "testset"  # the single chunk a test set was written as before it ran the pipeline's stages
MAX_ATTEMPTS = 4  # per slot: its first blueprint and three re-salted retries
Target = Cell | dict  # a slot's aim: its official cell, or its draw of the controllable properties
MAX_TOPUPS = 4  # rounds of extra slots for those no attempt filled


def skipped_line(env: Domain, kind: Kind) -> str | None:
    """The line a run (or `evosyn testsets`) says for a set the domain cannot have (None: it can)."""
    if kind == "official-matched" and (why := no_official_reason(env)) is not None:
        return f"test set {kind}: skipped: {why}; the uniform set is this domain's test set"
    return None


def test_set_run_id(env: Domain, seed: int = TEST_SEED, n: int = DEFAULT_SIZE, kind: Kind = "official-matched",
                    name: str = "testset") -> str:
    """``name``: ``testset``, or ``probeset`` for a Reflector's probe set (tasks/loop.py), built alike."""
    if kind not in KINDS:
        raise ValueError(f"test set kind {kind!r}: use one of {', '.join(KINDS)}")
    source = env.data_source  # another data folder than the environment's default: other tasks
    tag = f"-d{hashlib.sha256(source.encode()).hexdigest()[:8]}" if source else ""
    return f"{name}-{kind}-{env.name}-g{env.pack.generator_version}{tag}-s{seed}-n{n}"


def test_cases(store: Store, env: Domain, n: int = DEFAULT_SIZE, seed: int = TEST_SEED,
               kind: Kind = "official-matched", name: str = "testset") -> list[TaskCase]:
    """The test set ``kind`` of ``domain``: built once (also when several runs start together), then reused.

    Built only when its completion marker is missing: a partial build (tasks
    without verdicts, slots not yet retried) is never taken as a test set; the
    build resumes. Never read by synthesis or the Reflector.
    """
    if kind == "official-matched" and no_official_reason(env) is not None:
        return []  # nothing to match: the uniform set is the domain's only test set
    run_id = test_set_run_id(env, seed, n, kind, name)
    if not _built(store, run_id):
        with store_lock(store.location, run_id):  # concurrent first runs: one builds it, the others wait ...
            if not _built(store, run_id):  # ... and find it built
                if store.is_complete(TEST_SET_STAGE, run_id, 0):  # marked empty: its rows go, a fresh build follows
                    store.delete_run(run_id)
                build_test_set(store, env, n, seed, kind, name)
    return cases_for(store, run_id, {task_id for task_id, _ in members(store, run_id, kind, n).values()})


def _marker(store: Store, run_id: str) -> dict:
    """What a finished build stored in its completion marker ({} before the set is built)."""
    path = store.marker_path(TEST_SET_STAGE, run_id, 0)
    return json.loads(path.read_text()) if path.is_file() else {}


def _built(store: Store, run_id: str) -> bool:
    """Marked complete with a task in it. A set marked empty (by the code before a cell with no realized family
    was relaxed) is built again from scratch: its attempts' ids would name other cells."""
    marker = _marker(store, run_id)
    return bool(marker) and marker.get("n_tasks", 1) > 0


def is_built(store: Store, env: Domain, n: int = DEFAULT_SIZE, kind: Kind = "official-matched",
             seed: int = TEST_SEED) -> bool:
    """Whether the test set is built in ``store`` (``test_cases`` reads it without building anything)."""
    return _built(store, test_set_run_id(env, seed, n, kind))


def test_set_report(store: Store, env: Domain, n: int = DEFAULT_SIZE, seed: int = TEST_SEED,
                    kind: Kind = "official-matched") -> dict:
    """The report a finished build stored in its marker ({} before the set is built)."""
    return _marker(store, test_set_run_id(env, seed, n, kind)).get("report", {})


def test_set_space(env: Domain, run_id: str, kind: Kind, focus: str | None = None) -> SynthesisSpace:
    """The set's space; for ``uniform``, with the one ``focus`` property a slot requests (None: all of them,
    the space its report reads)."""
    space = load_initial_space(env.pack, run_id=run_id)
    if kind == "official-matched":  # the cell's counts must be factors a blueprint selects (and the verifier gates)
        return with_count_factors(space)
    controllable = env.pack.controllable
    return with_factors(space, controllable, (focus,) if focus else tuple(controllable))


# ------------------------------------------------------------------ slots and attempts
def _condition(slot: int, salt: int) -> str:
    return f"testset-slot-{slot}-salt-{salt}"


def _slot_of(condition_id: str) -> tuple[int, int]:
    _, _, slot, _, salt = condition_id.split("-")
    return int(slot), int(salt)


def _direction(ctx: Ctx, space: SynthesisSpace, kind: Kind, slot: int, salt: int, cell: Target) -> Direction:
    if kind == "official-matched":
        # a factor the space lacks (CAR-bench's has no expected_outcome) is left to the generator: the cell
        # is still matched on the observed value
        keys = {f.key for f in space.active}
        allowed = {k: [v] for k, v in zip(CELL, cell) if v != ANY_READS and k in keys}
        objective = "the official cell " + ", ".join(f"{k}={v}" for k, v in zip(CELL, cell))
    else:  # the slot's draw of the generator's controllable properties, the rest drawn anew on each retry
        allowed = {**uniform_draw(space, rng_for(ctx.run_id, slot, salt)), **cell}
        objective = "a uniform draw of every controllable property"
    return Direction(run_id=ctx.run_id, round=ctx.round, space_version=space.version,
                     direction_id=f"d-{stages._h(ctx.run_id, slot, salt)}", condition_id=_condition(slot, salt),
                     objective_type="exploration", objective=objective, allowed_values=allowed, budget_level="explore",
                     n_blueprints=1, rationale="test set: no steering", steering="none")


def filled(store: Store, run_id: str, kind: Kind) -> dict[int, tuple[str, dict[str, list[str]]]]:
    """slot -> (task id, observed factors) of the verified task that fills it; for ``official-matched`` only a
    task observed in the slot's cell fills it."""
    return {slot: (tid, obs) for slot, (_, tid, obs) in _fills(store, run_id, kind).items()}


def _fills(store: Store, run_id: str, kind: Kind) -> dict[int, tuple[int, str, dict[str, list[str]]]]:
    """slot -> (salt, task id, observed factors) of the attempt that filled it."""
    # called before every attempt of a build: only the few fields it needs, not whole records
    directions = {d["direction_id"]: d for d in store.read_fields(
        "directions", ["direction_id", "condition_id", "allowed_values"], run_id=run_id)}
    out: dict[int, tuple[int, str, dict]] = {}
    for v in store.read_fields("verdicts", ["direction_id", "passed", "task_id", "observed"], run_id=run_id):
        d = directions.get(v["direction_id"] or "")
        if d is None or not v["passed"] or not v["task_id"]:
            continue
        if kind == "official-matched" and not in_cell(v["observed"], target_of(d["allowed_values"])):
            continue
        slot, salt = _slot_of(d["condition_id"])
        if slot not in out or salt < out[slot][0]:
            out[slot] = (salt, v["task_id"], v["observed"])
    return dict(sorted(out.items()))


def members(store: Store, run_id: str, kind: Kind, n: int) -> dict[int, tuple[str, dict[str, list[str]]]]:
    """The set: its first ``n`` filled slots, in slot order (a top-up may fill more than were missing)."""
    return dict(list(filled(store, run_id, kind).items())[:n])


def _attempt(ctx: Ctx, space: SynthesisSpace, kind: Kind, slots: dict[int, Target], salt: int) -> None:
    """One try (salt ``salt``) for each of ``slots``: its direction, plan, and the round's chunked stages."""
    dirs = [_direction(ctx, space, kind, s, salt, cell) for s, cell in sorted(slots.items())]
    chunk = f"design-{stages._h(*[d.direction_id for d in dirs])}"
    if not ctx.done("design", chunk):
        ctx.put("directions", dirs, chunk)
        ctx.mark("design", chunk)
    blueprints = stages.plan(ctx, space, dirs)
    for part in stages.chunks(blueprints, TEST_SET_CHUNK_SIZE):
        tasks = stages.generate(ctx, space, part)
        name = stages.chunk_name("chunk", part)
        stages.verify_chunk(ctx, tasks, stages.rollout(ctx, tasks, name), name)


def _focal(controllable: dict[str, list[str]], slot: int) -> dict[str, list[str]]:
    """Slot ``slot``'s request of the uniform set: property ``slot mod K``, its buckets in turn."""
    keys = list(controllable)
    key = keys[slot % len(keys)]
    values = controllable[key]
    return {key: [values[(slot // len(keys)) % len(values)]]}


def _attempt_slots(ctx: Ctx, kind: Kind, slots: dict[int, Target], salt: int) -> None:
    """One try of ``slots``: the official cells in one space, the uniform slots grouped by their focal property."""
    if kind == "official-matched":
        _attempt(ctx, test_set_space(ctx.env, ctx.run_id, kind), kind, slots, salt)
        return
    groups: dict[str, dict[int, Target]] = {}
    for s, target in slots.items():
        groups.setdefault(next(iter(target)), {})[s] = target
    for focus, group in groups.items():
        _attempt(ctx, test_set_space(ctx.env, ctx.run_id, kind, focus), kind, group, salt)


def _topup(kind: Kind, official: dict[Cell, int], controllable: dict[str, list[str]], slots: dict[int, Target],
           done: dict, missing: int) -> dict[int, Target]:
    """New slots for ``missing`` tasks. Official: exactly ``missing``, over the official mass of the cells some
    slot filled or none tried yet. Uniform: fresh draws, as many more as the slots so far failed to fill (at most 3x; the set
    keeps its first ``n`` filled slots, and top-up slots are drawn like the first ones)."""
    start = max(slots, default=-1) + 1
    if kind == "uniform":
        k = min(3 * missing, math.ceil(missing * len(slots) / max(1, len(done))))
        return {start + i: _focal(controllable, start + i) for i in range(k)}
    realized, tried = {slots[s] for s in done}, set(slots.values())  # a small set may not have tried every cell
    weights: Counter = Counter()
    for c, k in official.items():  # a cell tried and never realized lends its mass to the nearest realized one
        sub = c if c in realized or c not in tried else nearest(c, realized)
        if sub is None and relaxed(c) not in tried:  # no realized cell of its family: ask again, reads left free
            sub = relaxed(c)
        if sub is not None:
            weights[sub] += k
    cells = allocate(dict(weights), missing)
    flat = [c for c, k in sorted(cells.items()) for _ in range(k)]
    return {start + i: c for i, c in enumerate(flat)}


def build_test_set(store: Store, env: Domain, n: int = DEFAULT_SIZE, seed: int = TEST_SEED,
                   kind: Kind = "official-matched", name: str = "testset") -> dict:
    """Build (or finish a partial build of) test set ``kind``, then mark it with its report (returned).

    Embedded roles only; no SFT examples (it is never training data). Its crash
    point, ``testset``, sits after a generate chunk's tasks, before their
    trajectories and verdicts (the observed factors).
    """
    run_id, domain, controllable = test_set_run_id(env, seed, n, kind, name), env.name, env.pack.controllable
    if kind == "uniform" and not controllable:  # flows/inputs.check_domain says so before any work
        raise ValueError(f"controllable: the {domain} pack names no property its generator controls, so a uniform "
                         "test set has nothing to draw (set controllable in its pack)")
    for table in TABLES:  # a partial build of the one-chunk layout before the stages: its rows would stay beside
        store.remove_chunk(table, run_id, 0, LEGACY_CHUNK)
    ctx = Ctx(store, run_id, 0, seed, env, diagnostic_fraction=None, source="test_set",
              fault_points={"generate": "testset"})
    space = test_set_space(env, run_id, kind)
    official = official_cells(env) if kind == "official-matched" else {}
    if kind == "official-matched":
        slots: dict[int, Target] = {}
        for cell, k in sorted(allocate(dict(official), n).items()):
            slots.update({len(slots) + i: cell for i in range(k)})
    else:
        slots = {i: _focal(controllable, i) for i in range(n)}
    # each attempt's slots are those no earlier attempt filled, and each top-up counts only the slots of the
    # phases before it: a resumed build (the store holding later attempts) repeats the same attempts
    phase = dict(slots)
    for topup in range(MAX_TOPUPS + 1):
        for salt in range(MAX_ATTEMPTS):
            fills = _fills(store, run_id, kind)
            todo = {s: c for s, c in phase.items() if s not in fills or fills[s][0] >= salt}
            if not todo:
                break
            _attempt_slots(ctx, kind, todo, salt)
        done = {s: f for s, f in _fills(store, run_id, kind).items() if s in slots}
        missing = n - len(done)
        phase = _topup(kind, dict(official), controllable, slots, done, missing) if missing > 0 and topup < MAX_TOPUPS else {}
        if not phase:
            break
        slots.update(phase)
    done = members(store, run_id, kind, n)
    report = _report(store, run_id, kind, space, official, slots, done, n, env.pack.generator_version)
    # what a repair rebuilds a broken chunk with (tasks/testset_repair.py)
    build = {"domain": domain, "kind": kind, "n": n, "seed": seed, "name": name, "data_source": env.data_source}
    store.mark_complete(TEST_SET_STAGE, run_id, 0, n_tasks=len(done), report=report, build=build)
    return report


# ------------------------------------------------------------------ the report
def _cells_json(counts: dict[Cell, float]) -> list[dict]:
    return [{**dict(zip(CELL, c)), "value": round(v, 6)} for c, v in sorted(counts.items())]


def _reason(verdicts: list[Verdict]) -> str:
    failed = [c for v in verdicts for c in v.checks if not c.passed]
    return f"{failed[-1].name}: {failed[-1].reason}"[:160] if failed else "verified outside its cell"


def _report(store: Store, run_id: str, kind: Kind, space: SynthesisSpace, official: dict[Cell, int],
            slots: dict[int, Target], done: dict, n: int, generator_version: object) -> dict:
    attempts = store.read_records("directions", run_id=run_id)
    report: dict = {"kind": kind, "run_id": run_id, "size": n, "tasks": len(done), "slots": len(slots),
                    "attempts": len(attempts), "generator_version": str(generator_version)}
    observed = [obs for _, obs in done.values()]
    if kind == "uniform":
        by_task = {t.task_id: t for t in store.read_records("tasks", run_id=run_id)}
        requested = [by_task[tid].requested for tid, _ in done.values() if tid in by_task]
        drawn = drawn_keys(space)
        asked = marginals(requested, drawn)
        report.update({"drawn": drawn, "requested_marginals": asked,
                       "observed_marginals": marginals(observed, sorted({k for o in observed for k in o})),
                       "tv_from_uniform": {k: round(tv_from_uniform(asked[k], space.factor(k).values), 6)
                                           for k in drawn}})
        return report
    p = distribution([c for c, k in official.items() for _ in range(k)])
    q = distribution([cell_of(o) for o in observed])
    realizable = {c: w for c, w in p.items() if c in q}
    mass = sum(realizable.values())
    by_dir = {}
    for v in store.read_records("verdicts", run_id=run_id):
        by_dir.setdefault(v.direction_id, []).append(v)
    unrealized = []
    for cell in sorted(set(p) - set(q)):
        tried = [d for d in attempts if cell_of(d.allowed_values) == cell]
        unrealized.append({**dict(zip(CELL, cell)), "official_tasks": official[cell], "attempts": len(tried),
                           "reason": _reason([v for d in tried for v in by_dir.get(d.direction_id, [])])})
    report.update({
        "official_tasks": sum(official.values()), "official": _cells_json(p), "realized": _cells_json(q),
        "tv": round(total_variation(p, q), 6),
        "official_mass_realizable": round(mass, 6),
        "reads_left_free": sum(1 for slot in done if slots.get(slot, ())[-1:] == (ANY_READS,)),  # relaxed cells' tasks
        "tv_realizable": round(total_variation({c: w / mass for c, w in realizable.items()}, q), 6) if mass else 1.0,
        # per factor of the cell: an unrealizable cell's mass went to its nearest realized cell, so the
        # marginals stay close where the joint cannot
        "tv_marginals": {k: round(total_variation(_marginal(p, i), _marginal(q, i)), 6) for i, k in enumerate(CELL)},
        "unrealized": unrealized})
    return report


def _marginal(dist: dict[Cell, float], i: int) -> dict[tuple, float]:
    out: dict[tuple, float] = {}
    for c, w in dist.items():
        out[(c[i],)] = out.get((c[i],), 0.0) + w
    return out


def report_line(report: dict) -> str:
    """One line of a set's report, for the run's test-set line."""
    head = f"test set {report['kind']}: {report['tasks']} tasks ({report['attempts']} blueprints tried)"
    if report["kind"] == "uniform":
        nw = report["observed_marginals"].get("num_write", {})
        tv = report["tv_from_uniform"]
        return (head + "; num_write " + " ".join(f"{k}:{v}" for k, v in nw.items())
                + "; TV from uniform " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(tv.items())))
    cells = ", ".join("/".join(u[k] for k in CELL) for u in report["unrealized"][:4])
    more = f" +{len(report['unrealized']) - 4} more" if len(report["unrealized"]) > 4 else ""
    return (head + f"; TV {report['tv']:.3f} vs {report['official_tasks']} official tasks "
            f"(TV {report['tv_realizable']:.3f} over the cells it realizes, "
            f"{report['official_mass_realizable']:.0%} of official mass); "
            f"{len(report['unrealized'])} cells unrealized" + (f": {cells}{more}" if cells else "")
            + (f"; {n} tasks asked with any read count" if (n := report.get("reads_left_free")) else ""))
