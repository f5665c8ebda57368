"""One interaction with the car: a fresh state set from a task's ``context_init_config``.

``step`` answers every call with CAR-bench's JSON envelope (``{"status":
"SUCCESS", "result": ...}`` or ``{"status": "FAILURE", "errors": {code:
message}}``) and never raises. On the way it records what CAR-bench's reward
looks at: the tool execution errors (refused calls, the planner's aside), the policy violations the
tools detect, and, for a hallucination task, every use of a removed tool or
parameter. A removed result field reads ``"unknown"``.
"""
from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING, Any

from evosyn.envs.base import Episode, Observation, Requestor
from evosyn.envs.car_bench.state import CarInitialState, CarState, FixedContext, split_config
from evosyn.envs.car_bench.tools import TOOLS, Raw, ToolContext, ToolFailure

if TYPE_CHECKING:
    from evosyn.envs.car_bench.domain import CarBenchDomain


def _blank(value: Any, path: list[str]) -> None:
    """Replace the field at ``path`` with "unknown", in every item of a list met on the way."""
    if isinstance(value, list):
        for item in value:
            _blank(item, path)
    elif isinstance(value, dict) and path and path[0] in value:
        if len(path) == 1:
            value[path[0]] = "unknown"
        else:
            _blank(value[path[0]], path[1:])


class CarBenchEpisode(Episode):
    def __init__(self, domain: CarBenchDomain, initial: CarInitialState | None = None):
        self.domain = domain
        self.initial = initial or CarInitialState()
        state, fixed = split_config(self.initial.context_init_config)
        self.ctx = ToolContext(state=state, fixed=fixed, data=domain.data, calendar_id=self.initial.calendar_id)
        self.tool_errors: list[str] = []
        self.hallucinated: list[str] = []  # removed tools / parameters the agent used anyway
        removed = [p.split(".") for p in self.initial.removed_part]
        self.removed_tools = {p[0] for p in removed if len(p) == 1}
        self.removed_params = {(p[0], tuple(p[1:])) for p in removed if len(p) >= 2 and p[0] != "result"}
        self.removed_results = [(p[1], p[2:]) for p in removed if p[0] == "result" and len(p) >= 3]

    @property
    def state(self) -> CarState:
        return self.ctx.state

    @property
    def fixed(self) -> FixedContext:
        return self.ctx.fixed

    @property
    def policy_errors(self) -> list[str]:
        return self.ctx.policy_errors

    # ------------------------------------------------------------ acting
    def step(self, name: str, arguments: dict[str, Any], requestor: Requestor = "assistant") -> Observation:
        tool = TOOLS.get(name) if isinstance(name, str) else None
        if tool is None or requestor != "assistant":
            return Observation(content=f"Unknown action {name}", error=True)
        if not isinstance(arguments, dict):
            return Observation(content=f"Error: arguments of {name} must be an object", error=True)
        self._note_hallucination(name, arguments)
        try:
            answer = tool.handler(self.ctx, **arguments)
        except ToolFailure as exc:
            if tool.tool_error:
                self.tool_errors.append(f"{name}: {exc.message}")
            return Observation(content=json.dumps({"status": "FAILURE", "errors": {exc.code: exc.message}}),
                               error=True)
        except Exception as exc:  # noqa: BLE001 - a tool error is data, never raised (envs/base.py)
            # a call the tool or the state cannot take (a missing argument, a wrong type, a value out of range):
            # CAR-bench answers these with "Error: ..." too, and does not count them as tool execution errors
            return Observation(content=f"Error: {' '.join(str(exc).split())}", error=True)
        if isinstance(answer, Raw):
            return Observation(content=answer.text, error=answer.text.startswith("Error"))
        blanks = [path for tool_name, path in self.removed_results if tool_name == name]
        # a tool may answer with the domain's own data (routes, contacts): blank a copy, never the data every
        # later episode of this process reads
        envelope = {"status": "SUCCESS", "result": copy.deepcopy(answer) if blanks else answer}
        for path in blanks:
            _blank(envelope["result"], path)
        return Observation(content=json.dumps(envelope))

    def _note_hallucination(self, name: str, arguments: dict[str, Any]) -> None:
        if name in self.removed_tools:
            self.hallucinated.append(name)
        for tool_name, path in self.removed_params:
            found: Any = arguments
            for part in path:
                found = found.get(part, KeyError) if isinstance(found, dict) else KeyError
            if tool_name == name and found is not KeyError:
                self.hallucinated.append(".".join((name, *path)))

    # ------------------------------------------------------------ checking
    def state_digest(self) -> str:
        return self.ctx.state.digest()

    def check_assertion(self, assertion: Any) -> bool:
        """CAR-bench has no environment assertions (its reward compares states): always False."""
        return False
