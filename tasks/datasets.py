"""Task sets and training examples: SFT splits, the per-round diagnostic set (the fixed test set: tasks/testset.py)."""
from __future__ import annotations

import hashlib
import json
from typing import Callable, Iterable

from evosyn.agents.learners.harness import TaskCase
from evosyn.envs.base import Domain
from evosyn.envs.ontology import OBSERVABLE
from evosyn.storage.records import Factor, Message, SFTExample, SynthesisSpace, SynthTask, Trajectory, Verdict
from evosyn.storage.store import Store

BUCKETS = ["0", "1", "2", "3-4", "5+"]


def _unit(key: str) -> float:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF


def sft_examples(kept: Iterable[tuple[SynthTask, Trajectory]], dom: Domain, diagnostic_fraction: float, seed: int
                 ) -> list[SFTExample]:
    """One example per kept (task, trajectory); a seeded, content-keyed share is held out as diagnostic."""
    # the SFT tool list is the one an agent is given on the task (``Domain.tools_for``), validated once per
    # distinct list: canonicalizing its ~15 JSON schemas again for every example was most of this function's
    # time. A domain whose tools do not depend on the task gives its one list, read once.
    tools_of: dict[tuple[str, str], list[dict]] = {}
    out = []
    for task, traj in kept:
        own = dom.task_context
        schemas = [t.openai_schema() for t in dom.tools_for(dom.task_from_json(task.definition))] if own else []
        key = (task.domain, json.dumps(schemas, sort_keys=True) if own else "")
        if key not in tools_of:
            schemas = schemas or [t.openai_schema() for t in dom.tools_for(None)]
            tools_of[key] = SFTExample(run_id="-", round=0, example_id="-", task_id="-", trajectory_id="-",
                                       messages=[], tools=schemas).tools
        split = "diagnostic" if _unit(f"{seed}/{task.task_id}") < diagnostic_fraction else "train"
        example = SFTExample(run_id=traj.run_id, round=traj.round, space_version=traj.space_version,
                             direction_id=traj.direction_id, blueprint_id=traj.blueprint_id,
                             example_id="ex-" + traj.trajectory_id[3:], task_id=task.task_id,
                             trajectory_id=traj.trajectory_id, split=split, messages=traj.messages)
        example.tools = tools_of[key]  # the validated list (assignment is not validated again)
        out.append(example)
    return out


def system_prompt(store: Store, run_id: str, domain: Domain) -> str | Callable[[SFTExample], str]:
    """The system prompt of each exported example: the policy the agent is given on its task
    (``Domain.task_policy``, as the harness gives it); the one policy of a domain whose policy and tools do not
    depend on the task."""
    if not domain.task_context:
        return domain.policy
    policies = {t.task_id: policy_of(domain, t) for t in store.read_records("tasks", run_id=run_id)}
    return lambda example: policies.get(example.task_id, domain.policy)


def policy_of(domain: Domain, task: SynthTask) -> str:
    """The system prompt an agent is given on ``task`` (``Domain.task_policy``; the domain's one policy where
    it does not depend on the task)."""
    return domain.task_policy(domain.task_from_json(task.definition)) if domain.task_context else domain.policy


def examples_upto(store: Store, run_id: str, round: int, split: str, drop: frozenset[str] = frozenset()
                  ) -> list[SFTExample]:
    """The examples of ``split`` of rounds <= ``round``, less those of the tasks in ``drop`` (tasks/dedup.py)."""
    rows = [e for e in store.read_records("sft_examples", run_id=run_id)
            if e.round <= round and e.split == split and e.task_id not in drop]
    return sorted(rows, key=lambda e: (e.round, e.example_id))


def as_trajectories(examples: list[SFTExample], system: str | Callable[[SFTExample], str] | None = None
                    ) -> list[Trajectory]:
    """The examples as trajectories to learn from; with ``system`` (``system_prompt``), each opens with the
    system prompt its agent is given, as an exported example does (the embedded learner reads the values it
    states: ``evosyn.agents.learners.prompt.stated_values``)."""
    out = []
    for e in examples:
        text = system(e) if callable(system) else system
        messages = [Message(role="system", content=text), *e.messages] if text else e.messages
        out.append(Trajectory(run_id=e.run_id, round=e.round, trajectory_id=e.trajectory_id, task_id=e.task_id,
                              messages=messages))
    return out


def with_policy(dom: Domain, task: SynthTask, trajectory: Trajectory) -> Trajectory:
    """``trajectory`` opening with the system prompt its agent is given on ``task`` (``Domain.task_policy``)."""
    policy = policy_of(dom, task)
    return trajectory.model_copy(update={"messages": [Message(role="system", content=policy), *trajectory.messages]})


def cases_for(store: Store, run_id: str, task_ids: set[str]) -> list[TaskCase]:
    tasks = {t.task_id: t for t in store.read_records("tasks", run_id=run_id,
                                                        where=lambda row: row["task_id"] in task_ids)}
    observed: dict[str, dict] = {}
    for v in store.read_fields("verdicts", ["task_id", "passed", "observed"], run_id=run_id):
        if v["task_id"] in tasks and v["passed"]:
            observed[v["task_id"]] = v["observed"]
    return [TaskCase(tasks[t], observed.get(t, {})) for t in sorted(tasks)]


def diagnostic_cases(store: Store, run_id: str, round: int) -> list[TaskCase]:
    """The diagnostic set: held-out verified tasks of every round <= ``round`` (accumulated)."""
    held_out = store.read_fields("sft_examples", ["task_id", "round", "split"], run_id=run_id)
    return cases_for(store, run_id, {e["task_id"] for e in held_out if e["round"] <= round and e["split"] == "diagnostic"})


def with_count_factors(space: SynthesisSpace, keys: tuple[str, ...] = ("num_write", "num_read")) -> SynthesisSpace:
    """The space plus write / read counts as experimental factors (bucketed), as a Reflector would add them."""
    return space.model_copy(update={"version": space.version + 1, "factors": space.factors + [
        Factor(key=k, values=BUCKETS, status="experimental", observable=True, added_in=space.version + 1)
        for k in keys]})


def with_factors(space: SynthesisSpace, controllable: dict[str, list[str]], factors: tuple[str, ...]
                 ) -> SynthesisSpace:
    """The space plus each named factor (with the values the generator realizes), experimental, observable when
    the verifier measures it; factors already in the space are left as they are."""
    new = [Factor(key=k, values=list(controllable[k]), status="experimental", observable=k in OBSERVABLE,
                  added_in=space.version + 1) for k in dict.fromkeys(factors) if k not in {f.key for f in space.factors}]
    return space.model_copy(update={"version": space.version + 1, "factors": space.factors + new}) if new else space


def kept_pairs(store: Store, run_id: str) -> list[tuple[SynthTask, Verdict]]:
    tasks = {t.task_id: t for t in store.read_records("tasks", run_id=run_id)}
    return [(tasks[v.task_id], v) for v in store.read_records("verdicts", run_id=run_id)
            if v.passed and v.task_id in tasks]
