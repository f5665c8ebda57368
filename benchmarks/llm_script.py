"""A scripted "competent model" for the LLM roles, served over HTTP (tests, `evosyn bench faults`).

It computes each reply from the request, the way a good model would answer
the prompt: the Designer, Planner and Generator replies come from the
embedded algorithms run on the inputs parsed out of the prompt; the teacher
and user simulator replay the embedded teacher's conversation of the task the
Generator reply produced. Every reply then goes through the roles' real
parsers and validators. ``Faulty`` wraps it with 429 / 500 / malformed replies.
"""
from __future__ import annotations

import hashlib
import json
import threading
from typing import TYPE_CHECKING

from evosyn.benchmarks.fake_llm_server import Reply, Request, anthropic_reply, answer, error, openai_reply

if TYPE_CHECKING:
    from evosyn.envs.base import Domain

MARKERS = {"You are the Designer": "designer", "You are the Planner": "planner", "You are the Generator": "generator",
           "You are the Repair step": "repair", "You are the Reflector": "reflector",
           "You are playing a customer": "user", "You are a customer-service agent": "teacher"}


def texts(body: dict) -> list[tuple[str, str]]:
    """(role, text) of every message, for both protocols."""
    out = [("system", body["system"] if isinstance(body.get("system"), str) else
            " ".join(b.get("text", "") for b in body.get("system") or []))] if body.get("system") else []
    for m in body.get("messages", []):
        c = m.get("content")
        if isinstance(c, list):
            c = " ".join(b.get("text", "") for b in c if isinstance(b, dict))
        out.append((m["role"], c or ""))
    return out


def role_of(body: dict) -> str:
    head = " ".join(t for _, t in texts(body)[:2])
    return next((r for marker, r in MARKERS.items() if marker in head), "unknown")


def after(text: str, label: str):
    """The JSON value that follows the line starting with ``label``."""
    start = text.index(label)
    start = text.index("\n", start) + 1
    return json.JSONDecoder().raw_decode(text[start:])[0]


def wants_json(request: Request) -> bool:
    b = request.body
    return bool(b.get("response_format") or (b.get("tool_choice") or {}).get("type") == "tool")


class RoleScript:
    def __init__(self, dom: Domain):
        """``dom``: the environment the scripted roles answer for (the caller resolved it)."""
        from evosyn.envs.ontology import load_initial_space

        self.dom = dom
        self.space = load_initial_space(self.dom.pack)
        self.by_reason: dict[str, object] = {}  # user scenario's reason for call -> embedded trajectory
        self.by_opening: dict[str, object] = {}
        self.lock = threading.Lock()
        self.seen: dict[str, int] = {}

    def __call__(self, request: Request):
        role = role_of(request.body)
        with self.lock:
            self.seen[role] = self.seen.get(role, 0) + 1
        first = next(t for r, t in texts(request.body) if r == "user")
        if role in ("teacher", "user"):
            return getattr(self, role)(request)
        payload = getattr(self, role)(first if role != "unknown" else "")
        return answer(request, payload)

    # ------------------------------------------------------------ structured roles
    def designer(self, prompt: str) -> dict:
        space = after(prompt, "SYNTHESIS SPACE")
        # the outcome factor as the domain's space names it (tau2's packs: expected_outcome; CAR-bench's:
        # expected_behavior)
        outcome = next(k for k in ("expected_outcome", "expected_behavior") if k in space)
        return {"conditions": [
            {"condition_id": f"c{n}", "objective_type": "exploration", "objective": f"explore {f} / {o}",
             "allowed_values": {"task_family": [f], outcome: [o]}, "budget_level": "explore",
             "rationale": "cold start: cover every family and outcome"}
            for n, (f, o) in enumerate((f, o) for f in space["task_family"]["values"]
                                       for o in space[outcome]["values"])]}

    def planner(self, prompt: str) -> dict:
        from evosyn.agents.planner import EmbeddedPlanner
        from evosyn.storage.records import Direction

        d = after(prompt, "DIRECTION FROM THE DESIGNER")
        key = prompt.split("variation key ")[1].split(")")[0]
        direction = Direction(run_id="s", round=1, direction_id=f"d-{key}-{d['objective']}", condition_id="c",
                              budget_level="explore", **d)
        bp = EmbeddedPlanner(rules=self.dom.pack.planner_rules).plan(direction, self.space, None, index=0, seed=0)
        return {"domain": bp.domain, "plan_id": bp.plan_id, "selected_dimensions": bp.selected_dimensions,
                "generation_intent": bp.generation_intent, "success_focus": bp.success_focus,
                "diversity_notes": bp.diversity_notes,
                "expected_difficulty_controls": bp.expected_difficulty_controls.model_dump()}

    def generator(self, prompt: str) -> dict:
        from evosyn.agents.generator import GeneratorOut, parse_generator
        from evosyn.agents.plans import DefaultPrior
        from evosyn.storage.records import Blueprint

        bp = after(prompt, "BLUEPRINT")
        builder = self.dom.pack.task_builder(self.dom, DefaultPrior())
        plan = builder.plan(bp["selected_dimensions"], bp["blueprint_id"], bp["seed"])
        out = {"user_id": plan.user_id,
               # an intent's ids: all the user simulator reads of its arguments, and all the schema sent lets a
               # model write (agents/generator_schema.py)
               "intents": [{"say": i["say"], "arguments": {k: v for k, v in (i.get("arguments") or {}).items()
                                                           if k.endswith("_id") and isinstance(v, str)}}
                           for i in plan.intents],
               "gold_actions": [{"name": a[0], "arguments": a[1], **({"requestor": "user"} if a[2:3] == ("user",)
                                                                       else {})}  # a device action
                                for a in plan.actions],
               "communicate_info": plan.info, "refusal_rule": (plan.refusal or {}).get("rule", ""),
               "side_requests": plan.fillers}
        # the conversation a good agent and user would have on the task the role builds from this reply
        blueprint = Blueprint(run_id="s", round=1, direction_id="d", blueprint_id=bp["blueprint_id"], plan_id="p",
                              domain=self.dom.name, selected_dimensions=bp["selected_dimensions"],
                              generation_intent=bp["generation_intent"], seed=bp["seed"],
                              expected_difficulty_controls=bp["expected_difficulty_controls"])
        self.remember(parse_generator(GeneratorOut(**out), blueprint, self.space, self.dom))
        return out

    def remember(self, task) -> None:
        """The teacher and user replay the embedded teacher's conversation of ``task`` (by its opening and its
        reason for calling); the Generator's reply registers its task, a test may register any other."""
        from evosyn.agents.teacher import EmbeddedTeacher

        traj = EmbeddedTeacher(self.dom).rollout(task)
        with self.lock:
            self.by_reason[self.dom.task_from_json(task.definition).scenario.reason_for_call] = traj
            self.by_opening[traj.messages[0].content] = traj

    def repair(self, prompt: str) -> dict:
        return {"action": "rerun", "reason": "roll out again"}

    def reflector(self, prompt: str) -> dict:
        return {"round_id": "r", "synthesis_space_version_in": 1, "dimension_reviews": [],
                "new_proposals": [{"action": "no_change", "reason": "weaknesses expressible in the space"}],
                "summary": "reallocation only"}

    # ------------------------------------------------------------ conversation roles
    def teacher(self, request: Request):
        msgs = [(r, t) for r, t in texts(request.body) if r != "system"]
        traj = self.by_opening.get(msgs[0][1]) if msgs else None
        k = sum(1 for m in request.body.get("messages", []) if m["role"] == "assistant")
        said = [m for m in traj.messages if m.role == "assistant"] if traj else []
        if k >= len(said):
            return _text(request, "I am sorry, I cannot help with that.")
        m = said[k]
        if m.tool_calls:
            c = m.tool_calls[0]
            if request.anthropic:
                return anthropic_reply(tool_use={"id": f"toolu_{k}", "name": c.name, "input": c.arguments})
            return openai_reply(None, {"id": f"call_{k}", "name": c.name, "arguments": c.arguments})
        return _text(request, m.content)

    def user(self, request: Request):
        scenario = next(t for r, t in texts(request.body) if r == "system")
        reason = scenario.split("Why you are calling: ", 1)[-1].split("\n", 1)[0]
        traj = self.by_reason.get(reason)
        k = sum(1 for m in request.body.get("messages", []) if m["role"] == "assistant")
        said = [m for m in traj.messages if m.role == "user"] if traj else []
        if k >= len(said):
            return _text(request, "Thanks, bye. ###STOP###")
        if said[k].tool_calls and request.body.get("tools"):  # a device action (dual control), with its tools
            c = said[k].tool_calls[0]
            if request.anthropic:
                return anthropic_reply(tool_use={"id": f"toolu_device_{k}", "name": c.name, "input": c.arguments})
            return openai_reply(None, {"id": f"device_{k}", "name": c.name, "arguments": c.arguments})
        return _text(request, (said[k].content or "") + (" ###STOP###" if k == len(said) - 1 else ""))


def _text(request: Request, text: str):
    return anthropic_reply(text=text) if request.anthropic else openai_reply(text)


class Faulty:
    """``rate`` of first-time requests fail: 429 (retry-after), 500 (retry-after) or a malformed reply.

    A fault is decided by a hash of the request body, so the schedule is the same on
    every run; a repeated identical request (a transport retry) is served normally.
    """

    def __init__(self, inner, rate: float = 0.3):
        self.inner, self.rate, self.enabled = inner, rate, True
        self.seen: set[str] = set()
        self.faults = {"429": 0, "500": 0, "malformed": 0}
        self.lock = threading.Lock()

    def arm(self, enabled: bool = True) -> None:
        """Switch faults on or off; a new phase forgets which requests it has seen."""
        with self.lock:
            self.enabled, self.seen = enabled, set()

    def __call__(self, request: Request):
        key = hashlib.sha256(json.dumps(request.body, sort_keys=True).encode()).hexdigest()
        with self.lock:
            fresh = key not in self.seen
            self.seen.add(key)
        h = int(key[:8], 16) / 0xFFFFFFFF
        if not (self.enabled and fresh and h < self.rate):
            return self.inner(request)
        kind = ("429", "500", "malformed")[int(key[8:10], 16) % 3]
        with self.lock:
            self.faults[kind] += 1
        if kind == "429":
            return error(429, "slow down", retry_after=0.01, anthropic=request.anthropic)
        if kind == "500":
            r = error(500, "internal error", anthropic=request.anthropic)
            return Reply(body=r.body, status=500, headers={"retry-after": "0.01"})
        if wants_json(request):
            return answer(request, '{"oops": [1, 2')  # malformed JSON
        return answer(request, "I will now", truncated=True)  # cut off by max_tokens
