"""Our verifier vs tau2's own evaluator on the same trajectories (official gold actions).

Four columns, each timed per task over every trajectory in its own pass, the
passes back to back:

- ``verifier``: ``run_checks`` with the task's stored gold digest, as the pipeline
  verifies a ``SynthTask`` (the digest is taken when the task is made, here before
  timing starts);
- ``verifier, gold replayed``: the same with no stored digest, so the gold
  actions are replayed too (a task from before the stored digest, or an official
  tau2 task);
- ``replay floor``: a fresh episode and the trajectory's tool calls alone, no
  checks and no digests: what any verifier that replays must pay;
- ``tau2 evaluator``: unmodified (it loads and hashes the domain DB per evaluation); only
  for a family whose benchmark evaluator is installed (tau2's); every family is timed
  against the replay floor.

Every call of ours starts cold for its task: the gold-replay cache and the
cached dumps of base entities are emptied first. Passes rather than interleaved
calls, because a call right after one of tau2's runs on the caches and freed
memory tau2 leaves behind (it loads and drops a whole DB), which would charge
tau2's habits to us. Times are CPU seconds (``time.process_time``) with wall
seconds beside; one warm-up call each is excluded (imports).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evosyn.envs.base import Domain

COLUMNS = ("verifier", "verifier_gold_replayed", "replay_floor", "tau2")
LABELS = {"verifier": "evosyn verifier (stored gold digest)", "verifier_gold_replayed": "evosyn verifier (gold replayed)",
          "replay_floor": "replay floor (tool calls only)", "tau2": "tau2 evaluator"}


def _timed(cpu: list[float], wall: list[float], fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn(*args, **kwargs)
    cpu.append(time.process_time() - c0)
    wall.append(time.perf_counter() - w0)
    return out


def replay_calls(dom: Any, task: Any, messages: list) -> None:
    episode = dom.episode(task.initial_state)
    for m in messages:
        for c in m.tool_calls:
            episode.step(c.name, c.arguments, c.requestor)


def run(dom: Domain, split: str | None = None, limit: int | None = None) -> dict[str, Any]:
    """``dom``: the environment the command resolved; ``split``: its official split (None: ``dom.default_split``).

    Every family is timed against the replay floor; the benchmark's own evaluator is the fourth column only where
    the family has one to run (``Domain.official_reward``: tau2's; None for CAR-bench's, which is not installed),
    and then the rewards are compared with it. ``ValueError`` (one line) for a split with no gold actions.
    """
    from evosyn.envs import replay
    from evosyn.envs.gold import gold_messages
    from evosyn.envs.verify import run_checks

    domain, split = dom.name, split or dom.default_split
    tasks = [t for t in dom.tasks(split) if t.gold_actions]
    tasks = tasks[:limit] if limit else tasks
    if not tasks:
        raise ValueError(f"{domain}/{split}: no official task with gold actions to verify")
    trajectories = [(t, gold_messages(dom, t), replay.gold_digest(dom, t)) for t in tasks]  # as a SynthTask stores it
    first_task, first_messages, _ = trajectories[0]
    run_checks(dom, first_task, first_messages)
    has_evaluator = dom.official_reward(first_task, first_messages) is not None
    columns = COLUMNS if has_evaluator else tuple(k for k in COLUMNS if k != "tau2")

    def tau2_reward(task: Any, messages: list) -> tuple[float, str]:
        return dom.official_reward(task, messages)  # type: ignore[return-value]  # not None: checked above

    cpu: dict[str, list[float]] = {k: [] for k in columns}
    wall: dict[str, list[float]] = {k: [] for k in columns}

    def cold() -> None:
        replay.gold_replay.cache_clear()
        for cow in (getattr(dom, "cow", None), getattr(dom, "user_cow", None)):
            if cow is not None:
                cow.forget_base_dumps()

    rewards: dict[str, list[float]] = {"verifier": [], "verifier_gold_replayed": [], "tau2": []}
    for task, messages, stored in trajectories:
        cold()
        rewards["verifier"].append(_timed(cpu["verifier"], wall["verifier"], run_checks, dom, task, messages,
                                          gold_digest=stored).reward)
    for task, messages, _ in trajectories:
        cold()
        rewards["verifier_gold_replayed"].append(_timed(cpu["verifier_gold_replayed"], wall["verifier_gold_replayed"],
                                                        run_checks, dom, task, messages).reward)
    for task, messages, _ in trajectories:
        _timed(cpu["replay_floor"], wall["replay_floor"], replay_calls, dom, task, messages)
    if has_evaluator:
        for task, messages, _ in trajectories:
            rewards["tau2"].append(_timed(cpu["tau2"], wall["tau2"], tau2_reward, task, messages)[0])
    n = len(tasks)
    per_task = {k: {"cpu_s": sum(cpu[k]) / n, "wall_s": sum(wall[k]) / n} for k in columns}
    ours, floor = per_task["verifier"]["cpu_s"], per_task["replay_floor"]["cpu_s"]
    out: dict[str, Any] = {
        "domain": domain, "split": split, "tasks": n, "evaluator": LABELS["tau2"] if has_evaluator else None,
        "gold_reward_1": {k: sum(r == 1.0 for r in rewards[k]) for k in ("verifier", "verifier_gold_replayed")},
        "per_task": per_task, "ours_s_per_task": ours, "floor_share": floor / ours,
        "agreeing_rewards": None, "agreeing": {}}
    if has_evaluator:
        agree = {k: sum(a == b for a, b in zip(rewards[k], rewards["tau2"]))
                 for k in ("verifier", "verifier_gold_replayed")}
        tau2_cpu = per_task["tau2"]["cpu_s"]
        out.update(agreeing_rewards=min(agree.values()), agreeing=agree, tau2_s_per_task=tau2_cpu,
                   speedup=tau2_cpu / ours, speedup_gold_replayed=tau2_cpu / per_task["verifier_gold_replayed"]["cpu_s"],
                   speedup_replay_floor=tau2_cpu / floor)
    return out


def headline(result: dict[str, Any]) -> str:
    """What the benchmark found, in one line: agreement with the benchmark's evaluator, or (a family without
    one to run) the gold trajectories our verifier gives reward 1."""
    where = f"{result['tasks']} tasks of {result['domain']}/{result['split']}"
    if result.get("agreeing_rewards") is not None:
        return f"{where}; {result['agreeing_rewards']} rewards agree with tau2's."
    gold = result["gold_reward_1"]["verifier"]
    return (f"{where}; {gold} gold trajectories verified with reward 1 (no evaluator of the benchmark's own is "
            "installed to compare with: against the replay floor only).")


def rows(result: dict[str, Any]) -> list[list[str]]:
    """One row per column timed: CPU and wall per task, and the ratio to the benchmark's evaluator where it ran,
    else to the replay floor."""
    per_task = result["per_task"]
    base = "tau2" if "tau2" in per_task else "replay_floor"
    ref = per_task[base]["cpu_s"]
    out = []
    for key in (k for k in COLUMNS if k in per_task):
        t = per_task[key]
        ratio = ("1x" if key == base else f"{ref / t['cpu_s']:.0f}x faster" if base == "tau2"
                 else f"{t['cpu_s'] / ref:.1f}x the floor")
        out.append([LABELS[key], f"{t['cpu_s'] * 1000:.3f} ms", f"{t['wall_s'] * 1000:.3f} ms", ratio])
    return out


def headers(result: dict[str, Any]) -> list[str]:
    return ["verifier", "CPU per task", "wall per task",
            "vs tau2 (CPU)" if "tau2" in result["per_task"] else "vs replay floor (CPU)"]
