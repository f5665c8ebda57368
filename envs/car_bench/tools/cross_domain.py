"""Cross-domain tools: arithmetic, clock arithmetic, a scratchpad to think, and a step planner.

None of them changes the car's state; the planner's notes live in the episode
only (CAR-bench leaves them out of the state too).
"""
from __future__ import annotations

import ast
import json
import operator
from typing import Any

from evosyn.envs.car_bench.tools.base import (
    CarTool,
    Raw,
    ToolContext,
    ToolFailure,
    params,
    string,
)

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos}
MAX_EXPONENT = 64  # 9**9**9 would hang the process; no in-car sum needs more


def _arith(node: ast.AST) -> float:
    """Only numbers, + - * / // ** and parentheses (what CAR-bench's calculator takes): a model's text is never
    handed to ``eval``."""
    if isinstance(node, ast.Expression):
        return _arith(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _arith(node.left), _arith(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ValueError(f"exponents above {MAX_EXPONENT} are not supported")
        return _OPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_arith(node.operand))
    raise ValueError("only numbers, + - * / and parentheses are allowed")


def calculate_math(ctx: ToolContext, expression: str) -> Raw:
    if not all(ch in "0123456789+-*/(). " for ch in expression):
        return Raw("Error: invalid characters in expression")
    try:
        return Raw(str(round(float(_arith(ast.parse(expression, mode="eval"))), 2)))
    except (SyntaxError, ValueError, ZeroDivisionError) as exc:
        return Raw(f"Error: {exc}")


def calculate_datetime(ctx: ToolContext, original_datetime: dict[str, Any], times_to_add: list[dict[str, Any]]) -> Raw:
    moment = dict(original_datetime)
    for step in times_to_add:
        moment["hour"] += step["hours"]
        moment["minute"] += step["minutes"]
        moment["hour"] += moment["minute"] // 60
        moment["minute"] %= 60
        moment["day"] += moment["hour"] // 24
        moment["hour"] %= 24
        if moment["day"] > 30:  # CAR-bench's clock never crosses a month
            return Raw("Error: calculation exceeds month - not supported")
    return Raw(json.dumps(moment))


def think(ctx: ToolContext, thought: str) -> Raw:
    return Raw("")


STEP_STATUSES = ("not_started", "in_progress", "completed", "blocked")


def planning(ctx: ToolContext, command: str, plan_id: str | None = None, title: str | None = None,
             steps: list[dict[str, Any]] | None = None, step_updates: list[dict[str, Any]] | None = None) -> Any:
    plans = ctx.plans.setdefault("plans", {})

    def existing() -> dict[str, Any]:
        if not plan_id or plan_id not in plans:
            raise ToolFailure("PLANNING_TOOL_ERROR", f"no plan {plan_id!r}")
        return plans[plan_id]

    if command in ("create", "update"):
        if command == "create" and (not plan_id or plan_id in plans or not steps):
            raise ToolFailure("PLANNING_TOOL_ERROR", "create needs a new plan_id and steps")
        plan = plans.setdefault(plan_id, {"plan_id": plan_id, "title": title or "", "steps": []}) \
            if command == "create" else existing()
        if title:
            plan["title"] = title
        if steps is not None:
            plan["steps"] = [{**s, "step_status": "not_started", "step_notes": ""} for s in steps]
        ctx.plans["active"] = plan_id
        return {"plan_details": plan}
    if command == "list":
        return {"plans": sorted(plans), "active": ctx.plans.get("active")}
    if command == "get":
        return {"plan_details": existing()}
    if command == "set_active":
        existing()
        ctx.plans["active"] = plan_id
        return {"active": plan_id}
    if command == "mark_steps":
        plan = existing()
        for update in step_updates or []:
            i = update["step_index"]
            if not 0 <= i < len(plan["steps"]) or update.get("step_status", "not_started") not in STEP_STATUSES:
                raise ToolFailure("PLANNING_TOOL_ERROR", f"bad step update {update}")
            plan["steps"][i].update({k: v for k, v in update.items() if k != "step_index"})
        return {"plan_details": plan}
    if command == "delete":
        existing()
        del plans[plan_id]
        return {"deleted": plan_id}
    raise ToolFailure("PLANNING_TOOL_001", f"unknown command {command!r}")


_NUM = {"type": "number"}

TOOLS = [
    CarTool("calculate_math", "generic", "cross_domain", "Calculator: evaluate an arithmetic expression.",
            params({"expression": string("Numbers, + - * / and parentheses.")}, ("expression",)), calculate_math),
    CarTool("calculate_datetime", "generic", "cross_domain", "Clock: add durations to a date and time.",
            params({"original_datetime": {"type": "object", "required": ["year", "month", "day", "hour", "minute"],
                                          "properties": {k: _NUM for k in ("year", "month", "day", "hour", "minute")},
                                          "description": "The start."},
                    "times_to_add": {"type": "array", "description": "Durations to add.",
                                     "items": {"type": "object", "required": ["hours", "minutes"],
                                               "properties": {"hours": _NUM, "minutes": _NUM},
                                               "additionalProperties": False}}},
                   ("original_datetime", "times_to_add")), calculate_datetime),
    CarTool("think", "generic", "cross_domain", "Scratchpad: write down a thought; nothing changes.",
            params({"thought": string("The thought.")}, ("thought",)), think),
    CarTool("planning_tool", "generic", "cross_domain", "Planner: create, update and tick off the steps of a plan.",
            params({"command": {"type": "string", "enum": ["create", "update", "list", "get", "set_active",
                                                           "mark_steps", "delete"], "description": "What to do."},
                    "plan_id": string("The plan's id."), "title": string("The plan's title."),
                    "steps": {"type": "array", "description": "The plan's steps.",
                              "items": {"type": "object", "required": ["step_description", "step_dependent_on"],
                                        "properties": {"step_description": {"type": "string"},
                                                       "step_dependent_on": {"type": "array",
                                                                             "items": {"type": "integer"}}}}},
                    "step_updates": {"type": "array", "description": "Status changes of steps.",
                                     "items": {"type": "object", "required": ["step_index"],
                                               "properties": {"step_index": {"type": "integer"},
                                                              "step_status": {"type": "string",
                                                                              "enum": list(STEP_STATUSES)},
                                                              "step_notes": {"type": "string"}}}}},
                   ("command",)), planning),
]
