"""Cross-domain tools: arithmetic, clock arithmetic, a scratchpad to think, and a step planner.

None of them changes the car's state; the planner's notes live in the episode
only (CAR-bench leaves them out of the state too; ``evosyn.envs.car_bench.tools.planning``).
"""
from __future__ import annotations

import ast
import json
import operator
from typing import Any

from evosyn.envs.car_bench.tools.base import CarTool, Raw, ToolContext, params, string
from evosyn.envs.car_bench.tools.planning import MARKABLE, planning

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
                    "plan_id": string("The plan's id: create, update, set_active and delete need it; get and "
                                      "mark_steps act on the active plan without it."),
                    "title": string("The plan's title (create needs one)."),
                    "steps": {"type": "array", "description": "The plan's steps.",
                              "items": {"type": "object", "required": ["step_description", "step_dependent_on"],
                                        "properties": {"step_description": {"type": "string"},
                                                       "step_dependent_on": {"type": "array",
                                                                             "items": {"type": "integer"}}}}},
                    "step_updates": {"type": "array", "description": "Status changes of steps.",
                                     "items": {"type": "object", "required": ["step_index"],
                                               "properties": {"step_index": {"type": "integer"},
                                                              "step_status": {"type": "string",
                                                                              "enum": list(MARKABLE)},
                                                              "step_notes": {"type": "string"}}}}},
                   ("command",)), planning, tool_error=False),
]
