"""How many distinct tasks a pack's generator can build, measured for `evosyn envs check`.

A small database gives few distinct tasks: the generator draws its entities from the database, so past some number
of tasks it builds the same ones again, and the dedup stage (tasks/dedup.py) flags them as copies of each other and of
the test sets' tasks. Nothing static says where that number is; ``capacity`` measures it: ``SAMPLE`` blueprints of the
pack's initial space, designed and planned as a run's first round does (the cold-start Designer, the embedded
Planner), built by the pack's generator, and counted by two fingerprints:

- the gold actions (requestor, tool, arguments, in order): the dedup stage's exact test, so two tasks with the same
  writes are the same task to it;
- the user's request with the gold actions: tasks that differ only in what the user asks.

Distinct of built is a floor ("at least K distinct"). The estimate of the total is Chao1 (bias-corrected:
S_obs + f1 (f1 - 1) / (2 (f2 + 1)), f1 and f2 the fingerprints seen once and twice), a two-line formula no library
here carries (scikit-bio has it, as a heavy dependency for one line); with no repeat at all there is nothing to
extrapolate from, and only the floor is given.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

from evosyn.envs.base import Domain, EnvTask

SAMPLE = 200  # blueprints built: a first round's default budget
REPEAT_NOTE = 0.10  # a repeat share above this adds the advice on database size (docs/guides/dedup.md)


@dataclass(frozen=True)
class Capacity:
    built: int  # tasks the generator built (of SAMPLE blueprints; the others it or the Planner refused)
    distinct_actions: int  # distinct gold-action lists among them
    distinct_tasks: int  # distinct (request, gold actions)
    estimate: float | None  # Chao1 over the gold-action lists; None with no repeat to extrapolate from

    @property
    def repeats(self) -> float:
        """Share of the built tasks whose gold actions repeat an earlier one's."""
        return 1 - self.distinct_actions / self.built if self.built else 0.0

    def line(self, seed: int = 0) -> str:
        if not self.built:
            return f"capacity: the generator built no task of {SAMPLE} blueprints (seed {seed}): nothing to count"
        head = (f"capacity: {self.built} tasks built from {SAMPLE} blueprints of the initial space (seed {seed}): "
                f"at least {self.distinct_actions} distinct by their gold actions, {self.distinct_tasks} by request "
                "and gold actions")
        if self.estimate is None:
            return head + "; no repeat: more distinct tasks than this are likely"
        line = (head + f"; {self.repeats:.0%} repeat an earlier task's gold actions; about {self.estimate:.0f} "
                "distinct in all (Chao1 estimate)")
        if self.repeats > REPEAT_NOTE:  # a round or a test set of this size is that much copies, flagged by dedup
            line += ("; a round or test set this large repeats tasks, which the dedup stage flags: a larger "
                     "database gives more distinct ones (docs/guides/dedup.md, How large a database)")
        return line


def actions_fingerprint(task: EnvTask) -> str:
    return json.dumps([[a.requestor, a.name, a.arguments] for a in task.gold_actions], sort_keys=True, default=str)


def chao1(counts: Counter) -> float | None:
    """Bias-corrected Chao1 richness of the fingerprints' counts (None: no fingerprint seen twice or more)."""
    f1 = sum(1 for c in counts.values() if c == 1)
    f2 = sum(1 for c in counts.values() if c == 2)
    if f1 == len(counts):
        return None
    return len(counts) + f1 * (f1 - 1) / (2 * (f2 + 1))


def capacity(env: Domain, n: int = SAMPLE, seed: int = 0) -> Capacity:
    """``n`` blueprints of ``env``'s initial space built by its generator, counted (module doc)."""
    from evosyn.agents.designer import ColdStart, EmbeddedDesigner
    from evosyn.agents.generator import EmbeddedGenerator, GenerationError
    from evosyn.agents.planner import EmbeddedPlanner, PlanError
    from evosyn.envs.ontology import load_initial_space

    pack, run_id = env.pack, "envs-check-capacity"
    space = load_initial_space(pack, run_id=run_id)
    directions = EmbeddedDesigner(pack.planner_rules).design(space, ColdStart(), n, run_id=run_id, round=0, seed=seed)
    planner, generator, summary = EmbeddedPlanner(rules=pack.planner_rules), EmbeddedGenerator(env), env.summary()
    tasks: list[EnvTask] = []
    for d in directions:
        for index in range(d.n_blueprints):
            try:
                made = generator.generate(planner.plan(d, space, summary, index=index, seed=seed), space)
            except (PlanError, GenerationError, KeyError):  # refused: a run records it, no task to count
                continue
            tasks.append(env.task_from_json(made.definition))
    actions = Counter(actions_fingerprint(t) for t in tasks)
    whole = {(t.scenario.reason_for_call, actions_fingerprint(t)) for t in tasks}
    return Capacity(built=len(tasks), distinct_actions=len(actions), distinct_tasks=len(whole),
                    estimate=chao1(actions))
