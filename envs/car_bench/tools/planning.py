"""The step planner (``planning_tool``), answering as CAR-bench's does.

An episode keeps its plans apart from the car's state (``ToolContext.plans``: the
plans by id and the active one's id). What an agent sees follows CAR-bench call
for call (``tests/envs/car_bench/test_agreement.py`` compares every answer):

- ``get`` and ``mark_steps`` without a ``plan_id`` act on the active plan: the one
  created or ``set_active`` last (models often leave the id out);
  ``create``, ``update``, ``set_active`` and ``delete`` need one;
- a step's status is derived from its dependencies: a step whose dependencies are
  all completed (or that has none) is ``executable_but_not_started`` until marked;
- every refusal is a ``PLANNING_TOOL_ERROR`` (``PLANNING_TOOL_001``: an unknown
  command), and none counts as a tool execution error (``CarTool.tool_error``):
  CAR-bench's reward never counts the planner's refusals.

A refusal found only after a change (an ``update`` whose new steps cannot be
shown) leaves the change in place, as in CAR-bench, so later answers agree too.
"""
from __future__ import annotations

from typing import Any

from evosyn.envs.car_bench.tools.base import ToolContext, ToolFailure

MARKABLE = ("not_started", "in_progress", "completed", "blocked")
READY, WAITING = "executable_but_not_started", "unresolved_dependencies_and_not_started"
COMMANDS = ("create", "update", "list", "get", "set_active", "mark_steps", "delete")


class _Refused(Exception):
    """A call the planner refuses (its message is the answer's)."""


def _store(ctx: ToolContext) -> dict[str, Any]:
    return ctx.plans.setdefault("plans", {})


def _named(ctx: ToolContext, plan_id: Any, command: str, *, or_active: bool = False) -> tuple[Any, dict[str, Any]]:
    """(id, plan) of ``plan_id``, or of the active plan where the command may fall back to it."""
    if not plan_id:
        if not or_active:
            raise _Refused(f"{command} needs a plan_id")
        plan_id = ctx.plans.get("active")
        if not plan_id:
            raise _Refused(f"{command}: no plan_id given and no plan is active (create one or set_active)")
    plans = _store(ctx)
    if plan_id not in plans:
        raise _Refused(f"{command}: there is no plan {plan_id!r}")
    return plan_id, plans[plan_id]


def _refresh(plan: dict[str, Any], i: int) -> None:
    """Step ``i``'s derived status: ready once its dependencies are completed, waiting before."""
    status, deps = plan["statuses"], plan["steps"][i]["step_dependent_on"]
    if not deps:
        if status[i] == "not_started":
            status[i] = READY
    elif all(status[d] == "completed" for d in deps):
        if status[i] == WAITING:
            status[i] = READY
    elif status[i] == "not_started":
        status[i] = WAITING


def _shown(ctx: ToolContext, plan: dict[str, Any]) -> dict[str, Any]:
    statuses = plan["statuses"]
    done = statuses.count("completed")
    total = len(plan["steps"])
    counts = {s: statuses.count(s) for s in ("completed", "in_progress", "blocked", READY, WAITING, "not_started")}
    steps = [{"index": i, "step_description": step["step_description"], "step_dependent_on": step["step_dependent_on"],
              "status": status, "notes": note}
             for i, (step, status, note) in enumerate(zip(plan["steps"], statuses, plan["notes"]))]
    return {"title": plan["title"], "plan_id": plan["plan_id"],
            "progress": {"completed": done, "total": total, "percentage": done / total * 100 if total else 0},
            "status_counts": counts, "steps": steps, "is_active": plan["plan_id"] == ctx.plans.get("active")}


def _check_new_steps(steps: Any) -> None:
    if not steps or not isinstance(steps, list):
        raise _Refused("create needs steps: a non-empty list")
    for i, step in enumerate(steps):
        if not isinstance(step, dict) or "step_description" not in step or "step_dependent_on" not in step:
            raise _Refused(f"step {i}: an object with step_description and step_dependent_on")
        deps = step["step_dependent_on"]
        if not isinstance(step["step_description"], str) or not isinstance(deps, list):
            raise _Refused(f"step {i}: step_description is text and step_dependent_on a list")
        if not all(isinstance(d, int) for d in deps) or any(d >= i for d in deps):
            raise _Refused(f"step {i}: step_dependent_on lists indices of earlier steps only")


def _create(ctx: ToolContext, plan_id: Any, title: Any, steps: Any) -> dict[str, Any]:
    if not plan_id:
        raise _Refused("create needs a plan_id")
    if plan_id in _store(ctx):
        raise _Refused(f"create: plan {plan_id!r} exists already (update changes it)")
    if not title:
        raise _Refused("create needs a title")
    _check_new_steps(steps)
    plan = {"plan_id": plan_id, "title": title, "steps": steps, "statuses": ["not_started"] * len(steps),
            "notes": [""] * len(steps)}
    for i in range(len(steps)):
        _refresh(plan, i)
    _store(ctx)[plan_id] = plan
    ctx.plans["active"] = plan_id
    return {"plan_created": True, "plan_id": plan_id, "plan_details": _shown(ctx, plan)}


def _update(ctx: ToolContext, plan_id: Any, title: Any, steps: Any) -> dict[str, Any]:
    plan_id, plan = _named(ctx, plan_id, "update")
    if title:
        plan["title"] = title
    if steps:
        if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
            raise _Refused("update: steps must be a list of objects")
        old = plan["steps"]
        # a step left where it was, with the same description, keeps its status and notes
        kept = [i < len(old) and step["step_description"] == old[i]["step_description"] for i, step in enumerate(steps)]
        plan["statuses"] = [plan["statuses"][i] if k else "not_started" for i, k in enumerate(kept)]
        plan["notes"] = [plan["notes"][i] if k else "" for i, k in enumerate(kept)]
        plan["steps"] = steps
    return {"plan_updated": True, "plan_id": plan_id, "plan_details": _shown(ctx, plan)}


def _listed(ctx: ToolContext) -> dict[str, Any]:
    active = ctx.plans.get("active")
    rows = []
    for plan_id, plan in _store(ctx).items():
        done, total = plan["statuses"].count("completed"), len(plan["steps"])
        rows.append({"plan_id": plan_id, "title": plan["title"], "is_active": plan_id == active,
                     "progress": {"completed": done, "total": total,
                                  "percentage": done / total * 100 if total else 0}})
    return {"plans": rows, "active_plan_id": active, "total_plans": len(rows)}


def _mark(ctx: ToolContext, plan_id: Any, updates: Any) -> dict[str, Any]:
    plan_id, plan = _named(ctx, plan_id, "mark_steps", or_active=True)
    if not updates or not isinstance(updates, list):
        raise _Refused("mark_steps needs step_updates: a non-empty list")
    for u in updates:  # every update checked before any is applied
        if not isinstance(u, dict) or not isinstance(u.get("step_index", None), int):
            raise _Refused("mark_steps: each update is an object with an integer step_index")
        if not 0 <= u["step_index"] < len(plan["steps"]):
            raise _Refused(f"mark_steps: step_index {u['step_index']} is not a step of plan {plan_id!r}")
        if "step_status" in u and u["step_status"] not in MARKABLE:
            raise _Refused(f"mark_steps: step_status is one of {', '.join(MARKABLE)}")
    applied, completed = [], set()
    for u in updates:
        i, before = u["step_index"], plan["statuses"][u["step_index"]]
        if "step_status" in u:
            plan["statuses"][i] = u["step_status"]
            if u["step_status"] == "completed":
                completed.add(i)
        if "step_notes" in u:
            plan["notes"][i] = u["step_notes"]
        applied.append({"step_index": i, "old_status": before, "new_status": plan["statuses"][i]})
    for done in sorted(completed):  # the steps waiting on a step now completed may be ready
        for i, step in enumerate(plan["steps"]):
            if done in step["step_dependent_on"]:
                _refresh(plan, i)
    return {"steps_updated": True, "plan_id": plan_id, "updates_applied": applied, "plan_details": _shown(ctx, plan)}


def _delete(ctx: ToolContext, plan_id: Any) -> dict[str, Any]:
    plan_id, _ = _named(ctx, plan_id, "delete")
    del _store(ctx)[plan_id]
    was_active = ctx.plans.get("active") == plan_id
    if was_active:
        ctx.plans["active"] = None
    return {"plan_deleted": True, "plan_id": plan_id, "was_active_plan": was_active}


def planning(ctx: ToolContext, command: str, plan_id: str | None = None, title: str | None = None,
             steps: list[dict[str, Any]] | None = None, step_updates: list[dict[str, Any]] | None = None) -> Any:
    try:
        if command == "create":
            return _create(ctx, plan_id, title, steps)
        if command == "update":
            return _update(ctx, plan_id, title, steps)
        if command == "list":
            return _listed(ctx)
        if command == "get":
            plan_id, plan = _named(ctx, plan_id, "get", or_active=True)
            return {"plan_id": plan_id, "plan_details": _shown(ctx, plan), "is_active": plan_id == ctx.plans.get("active")}
        if command == "set_active":
            plan_id, plan = _named(ctx, plan_id, "set_active")
            ctx.plans["active"] = plan_id
            return {"active_plan_set": True, "plan_id": plan_id, "plan_details": _shown(ctx, plan)}
        if command == "mark_steps":
            return _mark(ctx, plan_id, step_updates)
        if command == "delete":
            return _delete(ctx, plan_id)
    except _Refused as exc:
        raise ToolFailure("PLANNING_TOOL_ERROR", str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - a plan a model wrote oddly (a step without a field): a refusal
        raise ToolFailure("PLANNING_TOOL_ERROR", f"{command}: {type(exc).__name__}: {exc}") from None
    raise ToolFailure("PLANNING_TOOL_001", f"unknown command {command!r}; one of {', '.join(COMMANDS)}")
