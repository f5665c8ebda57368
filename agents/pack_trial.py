"""`evosyn envs check`'s trial of a domain pack: its code run once, each fault one line naming where it is.

A pack can load, list its tools and still fail on the first task (a tool that raises, a policy rule that reads a
field the state lacks, a generator that crashes): the static check (``evosyn.envs.pack_check``) cannot see
those. ``trial`` runs the pack as a round's first pass would, on a handful of items:

- every tool once, on a fresh episode, with arguments drawn from its schema and the database's example ids
  (a refusal is an error observation and fine; an exception escaping ``step`` is the fault);
- the gold actions of a few official tasks, replayed with the policy run before each write;
- a few tasks per family built by the pack's generator (the cold-start Designer and the embedded Planner, as a
  run's first round), their gold actions replayed and verified the same way.

Errors are faults of the pack's code (each naming its file and line); warnings are tasks whose gold actions the
verifier rejects (the generator builds tasks its own domain does not accept).
"""
from __future__ import annotations

import re
from typing import Any

from evosyn.envs.base import Domain, EnvTask, ToolSpec
from evosyn.envs.pack_check import Finding
from evosyn.envs.pack_errors import ToolFault, fault_line, run_tool

PER_FAMILY = 2  # generated tasks tried per task family
OFFICIAL = 5  # official tasks whose gold actions are replayed
SHOWN = 3  # warnings of one kind shown before they are counted


def trial(env: Domain, per_family: int = PER_FAMILY, seed: int = 0) -> list[Finding]:
    """The pack's faults (errors) and the gold actions its verifier rejects (warnings), errors first."""
    out = _tools(env)
    out += _replayed(env, [t for t in env.tasks(None) if t.gold_actions][:OFFICIAL], "official task")
    if env.pack.has_generator:
        out += _generated(env, per_family, seed)
    return sorted(_dedup(out), key=lambda f: f.level != "error")


def _dedup(found: list[Finding]) -> list[Finding]:
    """One line per fault (a tool that raises fails every task that calls it), warnings of one setting cut."""
    seen, out, warned = set(), [], {}
    for f in found:
        # an error once, whichever task or tool met it first
        key = re.sub(r"^(generator error: |\[unverifiable\] \S+: )", "", f.message) if f.level == "error" else f.line()
        if key in seen:
            continue
        seen.add(key)
        if f.level == "warning":
            warned[f.setting] = warned.get(f.setting, 0) + 1
            if warned[f.setting] > SHOWN:
                continue
        out.append(f)
    return out + [Finding("warning", setting, f"and {n - SHOWN} more like these")
                  for setting, n in warned.items() if n > SHOWN]


# ------------------------------------------------------------------ every tool once
def _tools(env: Domain) -> list[Finding]:
    ids = env.summary().example_ids
    out = []
    for spec in env.tools():
        try:
            run_tool(env.episode(None), spec.name, _arguments(spec, ids), spec.requestor)
        except ToolFault as exc:
            out.append(Finding("error", f"tool {spec.name}", str(exc)))
    return out


def _arguments(spec: ToolSpec, ids: dict[str, list[str]]) -> dict[str, Any]:
    """The tool's required arguments, each a plausible value of its type: an id of the database's examples
    for a string named like one of its tables, else a placeholder."""
    props = spec.parameters.get("properties", {})
    return {name: _value(name, props.get(name, {}), ids) for name in spec.parameters.get("required", [])}


def _value(name: str, schema: dict[str, Any], ids: dict[str, list[str]]) -> Any:
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type") or next((s.get("type") for s in schema.get("anyOf", []) if s.get("type") != "null"),
                                      "string")
    if kind == "string":
        stem = name.removesuffix("_id").removesuffix("_ids")
        table = next((v for t, v in ids.items() if v and (t.startswith(stem) or stem.startswith(t.rstrip("s")))),
                     None)
        return table[0] if table else next((v[0] for v in ids.values() if v), "x")
    return {"integer": 1, "number": 1.0, "boolean": False, "array": [], "object": {}}.get(kind)


# ------------------------------------------------------------------ gold actions, replayed and verified
def _replayed(env: Domain, tasks: list[EnvTask], what: str) -> list[Finding]:
    from evosyn.envs.gold import gold_messages
    from evosyn.envs.verify import run_checks

    out = []
    for task in tasks:
        name = f"{what} {task.id}"
        try:
            outcome = run_checks(env, task, gold_messages(env, task))
        except ToolFault as exc:
            out.append(Finding("error", name, str(exc)))
            continue
        except Exception as exc:  # the pack's task form, assertions, reward: where it raised
            out.append(Finding("error", name, f"its gold actions cannot be verified: {fault_line(exc)}"))
            continue
        for check in outcome.checks:
            if check.passed or check.skipped:
                continue
            faults = re.findall(r"\[unverifiable\].*?(?=; \[|$)", check.reason)
            for fault in faults:  # a policy rule that raised: the pack's bug (said once, whichever task met it)
                out.append(Finding("error", "policy.py", fault))
            if not faults:
                out.append(Finding("warning", what, f"{task.id}: its gold actions fail the {check.name} check "
                                                    f"({check.reason})"))
    return out


# ------------------------------------------------------------------ the generator, as a first round uses it
def _generated(env: Domain, per_family: int, seed: int) -> list[Finding]:
    from evosyn.agents.designer import ColdStart, EmbeddedDesigner
    from evosyn.agents.generator import EmbeddedGenerator, GenerationError
    from evosyn.agents.planner import EmbeddedPlanner, PlanError
    from evosyn.envs.ontology import load_initial_space

    pack = env.pack
    space = load_initial_space(pack, run_id="envs-check")
    families = space.factor("task_family").values
    budget = per_family * len(families)
    out: list[Finding] = []
    try:
        directions = EmbeddedDesigner(pack.planner_rules).design(space, ColdStart(), budget, run_id="envs-check",
                                                                 round=0, seed=seed)
        planner = EmbeddedPlanner(rules=pack.planner_rules)
        generator = EmbeddedGenerator(env)
    except Exception as exc:  # the space or the pack's settings the roles read
        return [Finding("error", "generator", f"the first round cannot start: {fault_line(exc)}")]
    tasks = []
    for d in directions:
        for index in range(d.n_blueprints):
            try:
                bp = planner.plan(d, space, env.summary(), index=index, seed=seed)
                made = generator.generate(bp, space)
            except (PlanError, KeyError):
                continue  # the planner found no selection: a rejection a run records, not a fault
            except GenerationError as exc:
                if not str(exc).startswith("infeasible"):  # a selection it cannot realize is its answer
                    out.append(Finding("error", "task_builder", str(exc)))
                continue
            try:
                tasks.append(env.task_from_json(made.definition))
            except Exception as exc:
                out.append(Finding("error", "task_from_json", f"a generated task does not read back: "
                                                              f"{fault_line(exc)}"))
    return out + _replayed(env, tasks, "generated task")
