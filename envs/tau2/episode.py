"""One interaction with a tau2 environment over copy-on-write DBs.

``step`` calls the tau2 tool function itself rather than tau2's
``Environment.get_response``: the same routing, the same ``sync_tools`` after
the call, the same ``Error: ...`` text for a failing call and the same
``to_json_str`` of the result, so the observation is byte-identical (tested on
every official gold trajectory), without the debug line ``get_response`` always
formats (a full pydantic repr of the result, even with logging off). A
read-only tool runs with its DB in reading mode, so it copies nothing. Any call
whose shape tau2 itself would reject goes through ``get_response`` unchanged.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from evosyn.envs.base import Episode, Observation, Requestor
from evosyn.envs.tau2.cow import Mode

if TYPE_CHECKING:
    from evosyn.envs.tau2.domain import Tau2Domain

# keyword names that collide with tau2's own parameters on the way to the tool (tau2 raises a TypeError)
_RESERVED = frozenset({"self", "tool_name", "requestor"})


def _get_response(env: Any, name: Any, arguments: Any, requestor: Any) -> Observation:
    """tau2's own path, for calls the direct path does not take."""
    from tau2.data_model.message import ToolCall

    try:
        call = ToolCall(id="step", name=name, arguments=dict(arguments), requestor=requestor)
        msg = env.get_response(call)
    except Exception as exc:  # tau2 itself refused the call shape: still an observation
        return Observation(content=f"Error: {exc}", error=True)
    return Observation(content=msg.content or "", error=bool(msg.error))


class Tau2Episode(Episode):
    def __init__(self, domain: Tau2Domain, env: Any, agent_mode: Mode | None = None,
                 user_mode: Mode | None = None):
        self.domain = domain
        self.env = env
        self._agent_mode = agent_mode or Mode()
        self._user_mode = user_mode or Mode()

    # ------------------------------------------------------------ modes
    @contextmanager
    def reading(self) -> Iterator[None]:
        """Lookups inside return shared base entities: only for code that never mutates what it reads."""
        modes = (self._agent_mode, self._user_mode)
        before = [m.reading for m in modes]
        for m in modes:
            m.reading = True
        try:
            yield
        finally:
            for m, was in zip(modes, before):
                m.reading = was

    def sync(self) -> None:
        """tau2's ``sync_tools``; the agent DB stays in reading mode when the pack says the sync cannot write it."""
        env = self.env
        if not self.domain.has_sync:
            return
        writes = self.domain.source.sync_writes_agent_db
        if writes is None or writes(env):
            env.sync_tools()
            return
        mode = self._agent_mode
        was, mode.reading = mode.reading, True
        try:
            env.sync_tools()
        finally:
            mode.reading = was

    # ------------------------------------------------------------ acting
    def step(self, name: str, arguments: dict[str, Any], requestor: Requestor = "assistant") -> Observation:
        env = self.env
        kit = env.user_tools if requestor == "user" else env.tools if requestor == "assistant" else None
        if (kit is None or env.solo_mode or type(name) is not str or type(arguments) is not dict
                or name not in self.domain.tool_names(kit) or not _RESERVED.isdisjoint(arguments)
                or not all(type(k) is str for k in arguments)):
            return _get_response(env, name, arguments, requestor)
        error = False
        try:
            if self.domain.tool_kind(name, requestor) == "read":
                with self.reading():
                    resp = getattr(kit, name)(**arguments)
            else:
                resp = getattr(kit, name)(**arguments)
            self.sync()
        except Exception as exc:  # exactly what get_response does with a failing call
            resp, error = f"Error: {exc}", True
        try:
            content = type(env).to_json_str(resp)
        except Exception as exc:  # get_response raises here; our step reports it as an observation
            return Observation(content=f"Error: {exc}", error=True)
        return Observation(content=content or "", error=error)

    def run_function(self, call: Any) -> Any:
        """tau2's ``run_env_function_call``: an environment function of either side, then a sync."""
        env_type = call.env_type
        if env_type == "user":
            kit = self.env.user_tools
        elif env_type == "assistant":
            kit = self.env.tools
        else:
            raise ValueError(f"Invalid environment type: {env_type}")
        res = getattr(kit, call.func_name)(**call.arguments)
        self.sync()
        return res

    def initialize(self, initial_state: Any) -> None:
        """tau2's ``set_state`` (initialization data, then actions, then a sync); a message history goes
        through tau2's own ``set_state``, which replays and checks it."""
        if initial_state.message_history:
            self.env.set_state(initialization_data=initial_state.initialization_data,
                               initialization_actions=initial_state.initialization_actions,
                               message_history=initial_state.message_history)
            return
        data = initial_state.initialization_data
        if data is not None:
            if data.agent_data is not None:
                self.env.tools.update_db(data.agent_data)
            if data.user_data is not None:
                self.env.user_tools.update_db(data.user_data)
        for action in initial_state.initialization_actions or []:
            self.run_function(action)
        self.sync()

    # ------------------------------------------------------------ checking
    def state_digest(self) -> str:
        h = hashlib.sha256()
        env, dom = self.env, self.domain
        agent_db = env.tools.db
        if dom.cow is not None and type(agent_db) is dom.cow.model:
            h.update(dom.cow.digest(agent_db).encode())
        else:
            h.update((env.get_db_hash() or "").encode())
        h.update(b"|")
        user_db = getattr(env.user_tools, "db", None) if env.user_tools is not None else None
        if dom.user_cow is not None and type(user_db) is dom.user_cow.model:
            h.update(dom.user_cow.digest(user_db).encode())
        else:
            h.update((env.get_user_db_hash() or "").encode())
        return h.hexdigest()

    def check_assertion(self, assertion: Any) -> bool:
        """tau2's ``run_env_assertion`` without raising: the function's bool result equals the expected one."""
        try:
            res = self.run_function(assertion)
            if not isinstance(res, bool):
                return False
            return res == assertion.assert_value
        except Exception:
            return False
