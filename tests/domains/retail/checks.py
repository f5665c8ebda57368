"""Checks of a retail plan on a fresh episode, shared by the tests and the feasibility measurement."""
from __future__ import annotations

from evosyn.agents.plans import Plan
from evosyn.domains.retail.policy import check_write
from evosyn.envs.gold import AFFIRMATIVE, confirmation_request
from evosyn.envs.policies import rule_code
from evosyn.envs.tau2.cow import peek
from evosyn.storage.records import Message, ToolCall


def initial_state(plan: Plan):
    if plan.initial_state is None:
        return None
    from tau2.data_model.tasks import InitialState

    return InitialState.model_validate(plan.initial_state)


def gold_run(domain, plan: Plan) -> tuple[list[str], int, int, list[Message], object]:
    """(problems, writes, reads, messages, episode): every gold action executed and policy-checked in order."""
    episode = domain.episode(initial_state(plan))
    messages = [Message(role="user", content="I would like to " + "; then ".join(i["say"] for i in plan.intents),
                        requestor="user")]
    problems, writes, reads = [], 0, 0
    for n, (name, args) in enumerate(plan.actions):
        kind = domain.tool_kind(name)
        call = ToolCall(id=f"call_{n}", name=name, arguments=dict(args))
        if kind == "write":
            messages.append(Message(role="assistant", content=confirmation_request(name, args)))
            messages.append(Message(role="user", content=AFFIRMATIVE, requestor="user"))
        messages.append(Message(role="assistant", tool_calls=[call]))
        if kind == "write":
            problems += [f"action {n}: {v}" for v in check_write(episode, call, messages)]
        before = episode.state_digest()
        obs = episode.step(name, args)
        messages.append(Message(role="tool", content=obs.content, tool_call_id=call.id, error=obs.error))
        if obs.error:
            problems.append(f"action {n} {name} failed: {obs.content[:120]}")
        if kind == "write":
            writes += 1
            if episode.state_digest() == before:
                problems.append(f"action {n} {name} did not change the state")
        elif kind == "read":
            reads += 1
    if plan.actions and plan.actions[0][0].startswith("find_user_id"):
        first = next(m for m in messages if m.role == "tool")
        if first.content != plan.user_id:
            problems.append(f"authentication returned {first.content!r}, not {plan.user_id}")
    return problems, writes, reads, messages, episode


def refusal_problems(domain, plan: Plan, messages: list[Message], episode) -> list[str]:
    """The refused request really breaks the stated rule (policy check, or the DB for a read)."""
    intent = plan.intents[0]
    tool, args, code = intent["refused_tool"], intent["arguments"], plan.refusal["code"]
    if domain.tool_kind(tool) != "write":
        order = peek(episode.env.tools.db.orders, args["order_id"])
        return [] if order is not None and order.user_id != plan.user_id else [
            f"refused {tool}: order {args['order_id']} belongs to the user"]
    call = ToolCall(id="refused", name=tool, arguments=dict(args))
    history = messages + [Message(role="assistant", content=confirmation_request(tool, args)),
                          Message(role="user", content=AFFIRMATIVE, requestor="user"),
                          Message(role="assistant", tool_calls=[call])]
    codes = {rule_code(v) for v in check_write(episode, call, history)}
    return [] if code in codes else [f"refused {tool} does not break [{code}] (violations: {sorted(codes)})"]


def plan_problems(domain, plan: Plan) -> tuple[list[str], int, int]:
    problems, writes, reads, messages, episode = gold_run(domain, plan)
    if plan.refusal is not None:
        if writes:
            problems.append(f"a refusal plan has {writes} writes")
        problems += refusal_problems(domain, plan, messages, episode)
    return problems, writes, reads
