"""Evaluation harness: the episode loop (``converse``, also official evaluation's), a task agent run on tasks with
the embedded user, scored by the verifier."""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from evosyn.agents.learners.base import TaskAgent
from evosyn.agents.user import ReactiveUser, device_turn
from evosyn.agents.verifier import verify
from evosyn.envs.base import Domain, EnvTask
from evosyn.storage.records import Evaluation, Message, SynthTask, Trajectory


@dataclass
class TaskCase:
    """A held-out task and the observed factors of its gold (teacher) solution."""

    task: SynthTask
    gold_observed: dict[str, list[str]]


class UserGaveUp(Exception):
    """The user had no usable reply (an LLM user's re-asks ran out): the episode ends as ``user_error``."""


class AgentFailed(Exception):
    """The agent's model refused the request or sent no chat reply (a served model past its context, an HTTP 400):
    the episode ends as ``agent_error`` (tau2's AGENT_ERROR) and is scored as it stands."""


def _said(user: Any, turn: Callable[[], Message]) -> Message:
    """A user turn; a user that cannot answer usably ends the episode, one whose LLM cannot be reached the run."""
    from evosyn.agents.ask import RoleRejected

    try:
        return turn()
    except RoleRejected as exc:
        if "LLM unavailable" in str(exc):
            from evosyn.agents.roles import StageUnavailable

            raise StageUnavailable("user", getattr(getattr(user, "client", None), "endpoint", "?"),
                                   str(exc).split("LLM unavailable: ", 1)[-1]) from None
        raise UserGaveUp(str(exc)) from None


def converse(agent: TaskAgent, domain: Domain, task: EnvTask | None, user: Any, max_steps: int = 40
             ) -> tuple[list[Message], str]:
    """The agent/user/tool loop of one episode on a fresh copy of ``task``'s initial state (None: the
    environment's), the agent given the task's tools and policy (``Domain.tools_for``, ``task_policy``):
    (messages, termination).

    It ends as tau2's orchestrator ends one (``tau2.orchestrator.Orchestrator.step``): ``user_stop`` as soon as a
    user message stops the call (tau2: its stop, transfer or out-of-scope token; here ``user.done``, which the
    scripted user sets with its goodbye and the LLM user with its stop token), the opening included;
    ``user_error`` when the user sends nothing usable (tau2's USER_ERROR for an empty user message: here its
    re-asks ran out, ``UserGaveUp``); ``max_steps`` after ``max_steps`` agent turns. The user's device actions
    are stepped as the user, right after its message (tau2 routes a user's tool calls to the environment).
    """
    ep = domain.episode(task.initial_state if task is not None else None)
    agent.reset([t.openai_schema() for t in domain.tools_for(task)], domain.task_policy(task))
    msgs: list[Message] = []
    try:
        msgs.append(_said(user, user.opening))
        msgs.extend(device_turn(ep, user, msgs[0]))
        if getattr(user, "done", False):
            return msgs, "user_stop"
        for _ in range(max_steps):
            reply = agent.act(list(msgs))
            msgs.append(reply)
            if reply.tool_calls:
                for call in reply.tool_calls:
                    obs = ep.step(call.name, call.arguments, call.requestor)
                    msgs.append(Message(role="tool", content=obs.content, tool_call_id=call.id, error=obs.error))
                continue
            answer = _said(user, partial(user.respond, reply.content or ""))
            msgs.append(answer)
            msgs.extend(device_turn(ep, user, answer))
            if user.done:
                return msgs, "user_stop"
    except UserGaveUp:
        return msgs, "user_error"
    except AgentFailed:
        return msgs, "agent_error"
    return msgs, "max_steps"


def run_episode(agent: TaskAgent, task: SynthTask, domain: Domain, max_steps: int = 40,
                model_version: str = "", id_key: str = "") -> Trajectory:
    """``converse`` with the embedded user playing a synthesized task's scenario. ``id_key``: what the
    trajectory id hashes beside the task (default ``model_version``); a round passes the model's content (round,
    fingerprint), not its run, so arms that train the same model get the same ids."""
    user = ReactiveUser(task.scenario, domain.pack.phrasing,
                        device_tools=[t.name for t in domain.tools("user")])
    msgs, termination = converse(agent, domain, domain.task_from_json(task.definition), user, max_steps)
    tid = "ev-" + hashlib.sha256(f"{task.task_id}/{id_key or model_version}".encode()).hexdigest()[:12]
    return Trajectory(run_id=task.run_id, round=task.round, space_version=task.space_version,
                      direction_id=task.direction_id, blueprint_id=task.blueprint_id, trajectory_id=tid,
                      task_id=task.task_id, messages=msgs, producer="learner", model_version=model_version,
                      termination=termination)


def evaluate(agent: TaskAgent, cases: list[TaskCase], domain: Domain, *, run_id: str, round: int,
             task_set: str, model_version: str, max_steps: int = 40,
             id_key: str = "") -> tuple[list[Evaluation], list[Trajectory]]:
    """``id_key``: as for ``run_episode``; without one the ids hash the run id and ``model_version``."""
    evaluations, trajectories = [], []
    for case in cases:
        traj = run_episode(agent, case.task, domain, max_steps, model_version, id_key)
        traj = traj.model_copy(update={"run_id": run_id, "round": round})
        evaluations.append(evaluation(case, traj, domain, task_set, id_key))
        trajectories.append(traj)
    return evaluations, trajectories


def evaluation(case: TaskCase, traj: Trajectory, domain: Domain, task_set: str, id_key: str = "") -> Evaluation:
    """The verifier's verdict on an episode of the case's task in ``domain``, as an evaluation row (``id_key``: as
    for ``run_episode``)."""
    verdict = verify(case.task.model_copy(update={"requested": {}}), traj, domain)
    run_id, round, model_version = traj.run_id, traj.round, traj.model_version
    salt = f"{round}/{task_set}/{case.task.task_id}/{id_key}" if id_key else \
        f"{run_id}/{round}/{task_set}/{case.task.task_id}/{model_version}"
    eid = hashlib.sha256(salt.encode()).hexdigest()[:16]
    return Evaluation(
        run_id=run_id, round=round, space_version=case.task.space_version, direction_id=case.task.direction_id,
        blueprint_id=case.task.blueprint_id, evaluation_id=eid, task_id=case.task.task_id,
        trajectory_id=traj.trajectory_id, model_version=model_version, task_set=task_set,
        success=verdict.passed, reward=verdict.reward,
        num_steps=sum(1 for m in traj.messages if m.role == "assistant"),
        observed=case.gold_observed, failed_checks=[c.name for c in verdict.failed()])


def success_by_slice(evaluations: list[Evaluation], factor: str) -> dict[str, tuple[int, int]]:
    """{value: (successes, count)} over the gold-solution value of a factor."""
    out: dict[str, list[int]] = {}
    for e in evaluations:
        for value in e.observed.get(factor, []):
            s = out.setdefault(value, [0, 0])
            s[0] += int(e.success)
            s[1] += 1
    return {k: (v[0], v[1]) for k, v in sorted(out.items())}
