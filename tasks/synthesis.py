"""One synthesis pass in-process: the round's stages, chunks and markers, without Prefect.

``evosyn synth`` and the fixed test set run ``run_pass``; the Prefect round
(``flows/round.py``) maps the same stage functions over the same chunks as
tasks. A pass is resumable like a round: rerun after a crash, its finished
stages are read back and only the missing chunks are computed. Its result is
read back from the store, so a resumed pass reports what the whole pass wrote.
"""
from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

import evosyn.tasks.stages as stages
from evosyn.tasks.progress import Emit
from evosyn.agents.designer import Steering
from evosyn.config import RoleConfig
from evosyn.storage.records import Arm, Blueprint, Direction, SFTExample, SynthesisSpace, SynthTask, Trajectory, Verdict

INPUTS_STAGE = "pass-inputs"  # marker: what the pass in a (run, round) partition was asked for


class PassConflict(ValueError):
    """The partition holds a pass of other inputs (another space, budget or steering): one line, naming them."""


class Kept(NamedTuple):
    blueprint: Blueprint
    task: SynthTask
    trajectory: Trajectory  # the verified one: the rollout, or its repair
    verdict: Verdict


@dataclass
class Pass:
    """Every record one pass wrote, read back from its (run, round) partition."""

    directions: list[Direction] = field(default_factory=list)
    blueprints: list[Blueprint] = field(default_factory=list)  # planned, in chunk order
    tasks: list[SynthTask] = field(default_factory=list)
    trajectories: list[Trajectory] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    examples: list[SFTExample] = field(default_factory=list)
    seconds: Counter = field(default_factory=Counter)  # per stage, this process's share of the pass
    cpu: Counter = field(default_factory=Counter)  # per stage, this process's CPU seconds

    @property
    def kept(self) -> list[Kept]:
        """The verified (task, trajectory, verdict) of each kept blueprint, in blueprint order."""
        tasks = {t.task_id: t for t in self.tasks}
        trajs = {t.trajectory_id: t for t in self.trajectories}
        passed = {v.blueprint_id: v for v in self.verdicts if v.passed and v.task_id in tasks}
        return [Kept(bp, tasks[v.task_id], trajs[v.trajectory_id], v)
                for bp in self.blueprints if (v := passed.get(bp.blueprint_id)) is not None]


def backends(llm_roles: dict[str, RoleConfig]) -> dict[str, str]:
    """The LLM-backed roles of a pass and what decides their replies (the rest are embedded)."""
    return {r: f"{rc.provider}:{rc.model}@{rc.base_url or ''} t={rc.temperature} max={rc.max_tokens}"
            for r, rc in sorted(llm_roles.items())}


def _inputs_key(ctx: stages.Ctx, space: SynthesisSpace, steering: Steering, budget: int, arm: str,
                chunk_size: int) -> str:
    # the seed too (seed 0's pass is not seed 1's), and the chunk size: other chunks would be written beside these
    return stages._h(space.model_dump_json(exclude={"created_at"}), steering.model_dump_json(), budget, arm,
                     sorted(backends(ctx.llm_roles).items()), ctx.seed, chunk_size)


# what a pass-inputs marker records, as a refusal names it
RECORDED = (("budget", "budget"), ("seed", "seed"), ("chunk_size", "chunk size"), ("space_version", "space version"),
            ("space", "space"), ("steering", "steering"), ("arm", "arm"), ("backends", "LLM roles"))


def _changed(prior: dict, now: dict, pack: str) -> tuple[list[str], bool]:
    """What differs between a recorded pass's inputs and these, each as ``name old -> new``; and whether the
    pack's code version is among them. A marker written before a field was recorded names it only when nothing
    recorded differs."""
    def shown(value) -> str:
        return "none" if value in (None, {}) else str(value)

    said = [f"{label} {shown(prior[k])} -> {shown(now[k])}" for k, label in RECORDED
            if k in prior and prior[k] != now[k]]
    if prior.get("inputs") != now["inputs"] and not said:
        said.append("the space or the steering (the same versions, other contents)")
    moved = prior.get("pack") != now["pack"]
    if moved:  # unrecorded: a pass of this pack made before pack versions were recorded
        said.append(f"pack {pack} code {(prior.get('pack') or 'unrecorded')[:6]} -> {(now['pack'] or 'none')[:6]}")
    return said, moved


def claim(ctx: stages.Ctx, space: SynthesisSpace, steering: Steering, budget: int, arm: str,
          chunk_size: int = 50, reuse: bool = False) -> None:
    """The partition is this pass's: a rerun (or resume) of the same inputs goes on, other inputs (space,
    steering, budget, arm, LLM roles, seed, chunk size, the code of a user's pack: ``evosyn.envs.pack_version``)
    are refused, naming what changed: their stages would be read back, or written beside its rows. ``reuse``:
    the pass goes on after an edit of the pack (its rows stay those of the pack it was made with)."""
    from evosyn.envs.pack_version import pack_version

    pack = ctx.env.pack
    now = {"inputs": _inputs_key(ctx, space, steering, budget, arm, chunk_size), "budget": budget, "seed": ctx.seed,
           "chunk_size": chunk_size, "space_version": space.version, "space": stages._h(space.model_dump_json(
               exclude={"created_at", "run_id"})), "steering": steering.kind, "arm": arm,
           "backends": backends(ctx.llm_roles), "pack": pack_version(pack)}
    path = ctx.store.marker_path(INPUTS_STAGE, ctx.run_id, ctx.round)
    if path.is_file():
        prior = json.loads(path.read_text())
        said, moved = _changed(prior, now, pack.name)
        if moved and reuse:  # --reuse: the pack's edit is let through, nothing else
            said, moved = said[:-1], False
        if said:
            hint = " (or --reuse to continue it with the edited pack)" if moved and len(said) == 1 else ""
            raise PassConflict(f"run {ctx.run_id} round {ctx.round} already holds a synthesis pass of other inputs: "
                               f"{'; '.join(said)}; pick another run id{hint}")
        return
    ctx.store.mark_complete(INPUTS_STAGE, ctx.run_id, ctx.round, **now, domain=pack.name)


def run_pass(ctx: stages.Ctx, space: SynthesisSpace, steering: Steering, budget: int, *, arm: Arm = "evosyn",
             chunk_size: int = 50, emit: Emit | None = None, reuse: bool = False) -> Pass:
    """design -> plan -> (generate -> rollout -> verify) per chunk of ``chunk_size`` blueprints, as a round does.

    ``emit``: each stage's ``StageEvent`` (one per chunk of generate, rollout and verify). ``reuse``: ``claim``'s.
    """
    claim(ctx, space, steering, budget, arm, chunk_size, reuse)
    seconds: Counter = Counter()
    cpu: Counter = Counter()
    clock, cpu_clock = time.perf_counter(), time.process_time()

    def lap(stage: str) -> None:
        nonlocal clock, cpu_clock
        now, now_cpu = time.perf_counter(), time.process_time()
        seconds[stage] += now - clock
        cpu[stage] += now_cpu - cpu_clock
        clock, cpu_clock = now, now_cpu

    directions = stages.design(ctx, space, steering, budget, arm, emit=emit)
    lap("design")
    blueprints = stages.plan(ctx, space, directions, emit=emit, feasible=True)
    lap("plan")
    for part in stages.chunks(blueprints, chunk_size):
        tasks = stages.generate(ctx, space, part, emit=emit)
        lap("generate")
        name = stages.chunk_name("chunk", part)
        trajectories = stages.rollout(ctx, tasks, name, emit=emit)
        lap("rollout")
        stages.verify_chunk(ctx, tasks, trajectories, name, emit=emit)
        lap("verify")
    result = read_pass(ctx, blueprints)
    lap("read back")
    result.seconds, result.cpu = seconds, cpu
    return result


def read_pass(ctx: stages.Ctx, blueprints: list[Blueprint]) -> Pass:
    read = lambda table: ctx.store.read_records(table, run_id=ctx.run_id, round=ctx.round)  # noqa: E731
    return Pass(directions=read("directions"), blueprints=blueprints, tasks=read("tasks"),
                trajectories=read("trajectories"), verdicts=read("verdicts"), examples=read("sft_examples"))


def summary(result: Pass) -> tuple[Counter, Counter]:
    """(kept / total by family and outcome, rejection reasons: the failed checks of each rejected item)."""
    by_slice: Counter = Counter()
    reasons: Counter = Counter()
    kept = {k.verdict.blueprint_id for k in result.kept}
    last: dict[str, Verdict] = {}
    for v in result.verdicts:  # in write order: a blueprint's last verdict is its final attempt
        last[v.blueprint_id] = v
    for bp in result.blueprints:
        sel = bp.selected_dimensions
        # a space without an outcome factor slices by the behaviour it expects of the agent (CAR-bench's)
        outcome = sel.get("expected_outcome") or sel.get("expected_behavior") or ["-"]
        key = (sel["task_family"][0], outcome[0])
        by_slice[(key, "total")] += 1
        if bp.blueprint_id in kept:
            by_slice[(key, "kept")] += 1
    for bid, v in last.items():
        if bid not in kept and not v.passed:
            reasons["; ".join(f"{c.name}: {c.reason}" for c in v.checks if not c.passed)] += 1  # whole: tables wrap
    return by_slice, reasons


def control(result: Pass, space: SynthesisSpace) -> dict[str, list[tuple[str, int, int, int, int]]]:
    """Requested vs realized values of each observable factor the blueprints select.

    factor -> rows (value, requested, generated, realized, kept): ``generated`` counts
    blueprints that became a task, ``realized`` those whose first rollout's observed
    value (re-derived from its replay by the verifier, before the factor gate
    decides anything: ``evosyn.tasks.metrics.first_rollouts``, as the round metrics'
    controllability reads it) equals the request, ``kept`` those verified in the end.
    """
    from evosyn.tasks.metrics import first_rollouts

    observable = [f.key for f in space.active if f.observable]
    first = first_rollouts(result.verdicts)
    kept = {k.blueprint.blueprint_id for k in result.kept}
    tasks = {t.blueprint_id for t in result.tasks}
    out: dict[str, list[tuple[str, int, int, int, int]]] = {}
    for key in observable:
        rows: dict[str, list[int]] = {}
        for bp in result.blueprints:
            want = bp.selected_dimensions.get(key)
            if not want:
                continue
            row = rows.setdefault(want[0], [0, 0, 0, 0])
            row[0] += 1
            row[1] += bp.blueprint_id in tasks
            v = first.get(bp.blueprint_id)
            row[2] += v is not None and v.observed.get(key) == want
            row[3] += bp.blueprint_id in kept
        values = space.factor(key).values
        out[key] = [(val, *rows[val]) for val in sorted(rows, key=lambda x: values.index(x) if x in values else 99)]
    return out
