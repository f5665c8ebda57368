"""Fuzzed model replies through every role's real parse-and-validate path (hypothesis strategies).

Each case is a whole response body, as a server would send it (OpenAI chat
completions or Anthropic messages), built from a valid answer of the role and
then broken: nested thousands of levels deep, over a megabyte long, NaN /
Infinity, numbers of thousands of digits, duplicate keys, escaped lone
surrogates, truncated, of the wrong type anywhere, or schema-valid with
values no rule allows (unknown ids, empty lists, huge counts). A case goes
through what the client does with a body (``read_reply``, ``interpret``) and
what the role does with the parsed answer (its ``parse_*`` validator, the
records it builds, their Arrow rows); the teacher's tool calls are executed in
a live episode. The outcome is ``accepted`` or ``rejected`` (``LLMOutputError``
or the role's ``Invalid`` / ``ValidationError``); anything else is a crash.

``fuzz(dom, n=3000)`` is what ``evosyn bench faults`` reports (``dom``: the default pack's environment); the test
suite runs the same strategies with a small example count (tests/agents/test_fuzz_replies.py).
"""
from __future__ import annotations

import functools
import json
from collections import Counter
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Callable

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from evosyn.benchmarks.fake_llm_server import anthropic_reply, openai_reply

if TYPE_CHECKING:
    from evosyn.envs.base import Domain

ROLES = ("designer", "planner", "generator", "teacher", "repair", "reflector")
NAN = "\x00NaN\x00"  # stand-ins replaced by raw JSON text after json.dumps (NaN and huge numbers are not values)
BIG = "\x00BIG:"  # BIG + raw JSON text: written as is (a number of 6,000 digits, 3,000 nested brackets)


@dataclass
class Fixture:
    """The inputs every role validates against: one space, direction, blueprint, task and trajectory."""

    domain: Any
    space: Any
    direction: Any
    blueprint: Any
    task: Any
    trajectory: Any
    probes: list
    valid: dict[str, dict]  # role -> a valid answer (a tool call for the teacher)


@functools.lru_cache(maxsize=1)
def fixture(dom: Domain) -> Fixture:
    """The valid answers every case is broken from, over ``dom`` (built once: the cases reuse it)."""
    from evosyn.agents.designer import ColdStart, EmbeddedDesigner
    from evosyn.agents.generator import EmbeddedGenerator
    from evosyn.agents.plans import DefaultPrior
    from evosyn.agents.planner import EmbeddedPlanner
    from evosyn.agents.teacher import EmbeddedTeacher
    from evosyn.envs.ontology import load_initial_space
    from evosyn.storage.records import Probe, ProbeBucket

    space, rules = load_initial_space(dom.pack, run_id="fuzz"), dom.pack.planner_rules
    directions = EmbeddedDesigner(rules).design(space, ColdStart(), 8, run_id="fuzz", round=1, seed=0)
    direction = directions[0]
    bp = EmbeddedPlanner(rules=rules).plan(direction, space, None, index=0, seed=0)
    plan = dom.pack.task_builder(dom, DefaultPrior()).plan(bp.selected_dimensions, bp.blueprint_id, bp.seed)
    task = EmbeddedGenerator(dom).generate(bp, space)
    traj = EmbeddedTeacher(dom).rollout(task)
    probe = Probe(run_id="fuzz", round=1, probe="num_write", buckets=[ProbeBucket(bucket="0", count=3)],
                  suggested_factor="num_write", suggested_values=["0", "1", "2", "3-4", "5+"])
    action = plan.actions[0]
    valid = {
        "designer": {"conditions": [
            {"condition_id": f"c{n}", "objective_type": "exploration", "objective": d.objective,
             "allowed_values": d.allowed_values, "budget_level": "explore", "rationale": "cover the space"}
            for n, d in enumerate(directions[:3])]},
        "planner": {"domain": bp.domain, "plan_id": bp.plan_id, "selected_dimensions": bp.selected_dimensions,
                    "generation_intent": bp.generation_intent, "success_focus": bp.success_focus,
                    "diversity_notes": bp.diversity_notes,
                    "expected_difficulty_controls": bp.expected_difficulty_controls.model_dump()},
        "generator": {"user_id": plan.user_id,
                      "intents": [{"say": i["say"], "arguments": i.get("arguments") or {}} for i in plan.intents],
                      "gold_actions": [{"name": a[0], "arguments": a[1]} for a in plan.actions],
                      "communicate_info": plan.info, "refusal_rule": (plan.refusal or {}).get("rule", ""),
                      "side_requests": plan.fillers},
        "teacher": {"name": action[0], "arguments": action[1]},
        "repair": {"action": "revise", "reason": "the agent skipped a confirmation", "messages": [
            {"role": m.role, "content": m.content or "",
             "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in m.tool_calls]}
            for m in traj.messages if m.role in ("user", "assistant")]},
        "reflector": {"round_id": "fuzz/r1", "synthesis_space_version_in": space.version, "dimension_reviews": [],
                      "new_proposals": [{"action": "promote_probe_to_dimension", "dimension_name": "num_write",
                                         "values": probe.suggested_values, "reason": "failures follow writes"}],
                      "summary": "add the write count"},
    }
    return Fixture(dom, space, direction, bp, task, traj, [probe], valid)


# ---------------------------------------------------------------- the path a reply takes
def _schema(role: str):
    from evosyn.agents.designer import DesignerOut
    from evosyn.agents.generator import GeneratorOut
    from evosyn.agents.planner import PlannerOut
    from evosyn.agents.reflector_llm import ReflectorOut
    from evosyn.agents.repair import RepairOut

    return {"designer": DesignerOut, "planner": PlannerOut, "generator": GeneratorOut, "repair": RepairOut,
            "reflector": ReflectorOut}.get(role)


def _storable(records: list) -> None:
    """Every record the role built lands in an Arrow table (what ``Store.write`` does first)."""
    from evosyn.storage.arrow import to_table

    for rec in records:
        to_table([rec], type(rec))


def _validate(role: str, parsed: Any, calls: list, text: str, fx: Fixture) -> None:
    from evosyn.agents.designer import ColdStart, parse_designer
    from evosyn.agents.generator import parse_generator
    from evosyn.agents.planner import parse_planner
    from evosyn.agents.reflector import apply_reflection
    from evosyn.agents.reflector_llm import parse_reflector
    from evosyn.agents.repair import parse_repair
    from evosyn.agents.teacher import tool_turn
    from evosyn.storage.records import Message, Trajectory

    if role == "designer":
        _storable(parse_designer(parsed, fx.space, ColdStart(), 8, run_id="fuzz", round=1))
    elif role == "planner":
        _storable([parse_planner(parsed, fx.direction, fx.space, index=0, seed=0,
                                 rules=fx.domain.pack.planner_rules)])
    elif role == "generator":
        task = parse_generator(parsed, fx.blueprint, fx.space, fx.domain)
        _storable([task])
    elif role == "repair":
        parse_repair(parsed, fx.trajectory, fx.domain)
    elif role == "reflector":
        reviews, proposal = parse_reflector(parsed, fx.space, fx.probes)
        _storable([apply_reflection(fx.space, reviews, proposal, round=1)])
    elif role == "teacher":  # the rollout's turn: tool calls run in a live episode, or a text reply
        episode = fx.domain.episode(fx.domain.task_from_json(fx.task.definition).initial_state)
        res = SimpleNamespace(tool_calls=calls, text=text)  # the ChatResult fields ``tool_turn`` reads
        msgs = tool_turn(res, episode, 1) if calls else [Message(role="assistant", content=text)]
        t = fx.trajectory
        _storable([Trajectory(run_id=t.run_id, round=t.round, trajectory_id=t.trajectory_id, task_id=t.task_id,
                              messages=[*t.messages[:1], *msgs])])


def check(fx: Fixture, role: str, body: Any, anthropic: bool = False) -> str:
    """``accepted`` or ``rejected``; any other exception is a crash and propagates."""
    from pydantic import ValidationError

    from evosyn.agents.ask import Invalid
    from evosyn.agents.llm import LLMOutputError
    from evosyn.agents.llm.providers import AnthropicProvider, OpenAIProvider
    from evosyn.agents.llm.replies import interpret, read_reply

    schema = _schema(role)
    kwargs = {"tool_choice": {"type": "tool", "name": schema.__name__}} if anthropic and schema else {}
    parse = AnthropicProvider.parse if anthropic else OpenAIProvider.parse
    try:
        text, parsed, calls, _ = interpret(read_reply(parse, body, kwargs), schema, 4096)
    except LLMOutputError:
        return "rejected"
    if schema is not None and parsed is None:  # a tool call where an answer was asked: the role re-asks
        return "rejected"
    if role == "teacher" and not calls and not text.strip():
        return "rejected"  # neither text nor a tool call: re-asked by the teacher
    try:
        _validate(role, parsed, calls, text, fx)
    except (Invalid, ValidationError):
        return "rejected"
    return "accepted"


# ---------------------------------------------------------------- strategies
def _dumps(value: Any) -> str:
    """JSON text, with the NaN and huge-number stand-ins written raw (what a broken server sends)."""
    text = json.dumps(value, ensure_ascii=False)
    text = text.replace(json.dumps(NAN), "NaN")
    while BIG in text:
        start = text.index(json.dumps(BIG)[:-1])
        end = text.index('"', start + 1)
        digits = text[start + 1:end].split(":", 1)[1]
        text = text[:start] + digits + text[end + 1:]
    return text


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                      st.text(max_size=30))
json_value = st.recursive(json_leaf, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                            st.dictionaries(st.text(max_size=8), kids, max_size=4)),
                          max_leaves=12)


@st.composite
def poison(draw) -> Any:
    """A value no well-formed reply holds."""
    kind = draw(st.sampled_from(["deep_list", "deep_dict", "nan", "inf", "big_int", "big_float", "surrogate",
                                 "raw_surrogate", "huge_string", "wrong_type", "empty_list", "unknown_id", "long_id"]))
    depth = draw(st.integers(65, 3000))
    if kind == "deep_list":
        return BIG + "[" * depth + "0" + "]" * depth
    if kind == "deep_dict":
        return BIG + '{"a":' * depth + "0" + "}" * depth
    if kind in ("nan", "inf"):
        return NAN if kind == "nan" else BIG + draw(st.sampled_from(["Infinity", "-Infinity", "1e999"]))
    if kind == "big_int":
        return BIG + "9" * draw(st.integers(65, 6000))
    if kind == "big_float":
        return BIG + "1." + "5" * draw(st.integers(65, 400)) + "e308"
    if kind == "surrogate":
        return "\\ud800" + draw(st.text(max_size=5))  # an escaped lone surrogate (written raw below)
    if kind == "raw_surrogate":
        return "a\ud800b"  # the character itself, as a server's broken decoder may hand it over
    if kind == "huge_string":
        return "x" * 1_000_050
    if kind == "empty_list":
        return []
    if kind == "unknown_id":
        return draw(st.sampled_from(["u_nobody", "RES404", "no_such_tool", "c999", "zzz"]))
    if kind == "long_id":
        return "id" * draw(st.integers(100, 5000))
    return draw(json_value)


def _parsed(value: Any) -> Any:
    """A poison value as the SDK's ``json.loads`` hands it over (NaN a float, a huge number an int or inf)."""
    if value == NAN:
        return float("nan")
    if isinstance(value, str) and value.startswith(BIG):
        raw = value[len(BIG):]
        if raw[:1] in "[{":  # nested: built without recursion, as deep as a decoder would go
            depth = min(raw.count("["), 500) if raw[0] == "[" else min(raw.count("{"), 500)
            return functools.reduce(lambda acc, _: [acc] if raw[0] == "[" else {"a": acc}, range(depth), 0)
        try:
            return int(raw)
        except ValueError:
            return float(raw)
    return value


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _replace(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    out = list(value)
    out[head] = _replace(value[head], rest, new)
    return out


@st.composite
def answer_text(draw, fx: Fixture, role: str) -> tuple[str, bool]:
    """(the answer's JSON text, truncated?) for one role: a valid answer, then broken."""
    base = fx.valid[role]
    kind = draw(st.sampled_from(["poison", "poison", "poison", "mutate", "truncate", "duplicate", "garbage",
                                 "valid"]))
    truncated = False
    if kind == "poison":
        path = draw(st.sampled_from(_paths(base)))
        text = _dumps(_replace(base, path, draw(poison())))
    elif kind == "mutate":  # a schema-valid-looking value of the wrong kind somewhere
        path = draw(st.sampled_from(_paths(base)))
        text = _dumps(_replace(base, path, draw(json_value)))
    elif kind == "truncate":
        full = _dumps(base)
        text, truncated = full[: draw(st.integers(0, max(0, len(full) - 1)))], draw(st.booleans())
    elif kind == "duplicate":
        key = next(iter(base))
        text = "{" + json.dumps(key) + ": " + _dumps(draw(json_value)) + ", " + _dumps(base)[1:]
    elif kind == "garbage":
        text = draw(st.one_of(st.text(max_size=200), st.just("```json\n" + _dumps(base) + "\n```"),
                              json_value.map(_dumps)))
    else:
        text = _dumps(base)
    return text.replace("\\\\ud800", "\\ud800"), truncated


@st.composite
def body(draw, fx: Fixture, role: str) -> tuple[Any, bool]:
    """(a whole response body, anthropic?) carrying a broken answer, or a broken envelope."""
    anthropic = draw(st.booleans())
    if draw(st.integers(0, 9)) == 0:  # the envelope itself is wrong (as the SDK parsed it)
        envelope = anthropic_reply(text="{}") if anthropic else openai_reply("{}")
        path = draw(st.sampled_from(_paths(envelope)))
        return _replace(envelope, path, _parsed(draw(st.one_of(poison(), json_value)))), anthropic
    text, truncated = draw(answer_text(fx, role))
    if role == "teacher":  # tool-call arguments are the answer
        base = fx.valid["teacher"]
        if draw(st.booleans()):
            return (anthropic_reply(text=text, stop_reason="max_tokens" if truncated else None) if anthropic
                    else openai_reply(text, finish_reason="length" if truncated else None)), anthropic
        if anthropic:
            try:
                args = json.loads(text)
            except (ValueError, RecursionError):
                args = text
            return anthropic_reply(tool_use={"id": "t1", "name": base["name"], "input": args}), anthropic
        return openai_reply(None, {"id": "c1", "name": base["name"], "arguments": text}), anthropic
    if anthropic:
        try:  # the forced answer tool carries parsed JSON; what does not parse comes as text
            payload = json.loads(text)
        except (ValueError, RecursionError):
            payload = None
        if isinstance(payload, dict):
            name = _schema(role).__name__
            return anthropic_reply(tool_use={"id": "t1", "name": name, "input": payload},
                                   stop_reason="max_tokens" if truncated else None), anthropic
        return anthropic_reply(text=text, stop_reason="max_tokens" if truncated else None), anthropic
    return openai_reply(text, finish_reason="length" if truncated else None), anthropic


# ---------------------------------------------------------------- the benchmark
def _fuzz_role(fx: Fixture, role: str, count: int, random_seed: int, on_crash) -> dict[str, int]:
    tally: Counter = Counter()

    @seed(random_seed)
    @settings(max_examples=max(1, count), database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(case=body(fx, role))
    def one(case):
        tally["replies"] += 1
        try:
            outcome = check(fx, role, *case)
        except Exception as exc:  # what the benchmark measures
            tally["crashes"] += 1
            if on_crash:
                on_crash(role, f"{type(exc).__name__}: {str(exc)[:300]}")
        else:
            tally["accepted" if outcome == "accepted" else "rejections"] += 1

    one()
    return {k: tally[k] for k in ("replies", "accepted", "rejections", "crashes")}


def fuzz(dom: Domain, n: int = 3000, random_seed: int = 0, roles: tuple[str, ...] = ROLES,
         on_crash: Callable[[str, str], None] | None = None) -> dict[str, dict[str, int]]:
    """``n`` fuzzed replies split over ``roles``: per role {replies, accepted, rejections, crashes}.

    A crash (any exception but a clean rejection) is counted, not raised; ``on_crash(role, what)``
    sees each one.
    """
    fx = fixture(dom)  # built once, outside the examples' time
    out: dict[str, dict[str, int]] = {}
    per_role = [n // len(roles) + (1 if i < n % len(roles) else 0) for i in range(len(roles))]
    for role, count in zip(roles, per_role):
        out[role] = _fuzz_role(fx, role, count, random_seed, on_crash)
    return out


def main() -> None:  # python -m evosyn.benchmarks.fuzz [n]
    import sys

    from evosyn.flows.compile import compile_domain

    result = fuzz(compile_domain(None).env, int(sys.argv[1]) if len(sys.argv) > 1 else 3000,
                  on_crash=lambda role, what: print(f"crash {role}: {what}", file=sys.stderr))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
