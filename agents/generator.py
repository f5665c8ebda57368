"""Generator: turns a blueprint into an executable ``SynthTask`` (the environment family's task + requested values).

Both generators describe the task family-free (``evosyn.envs.base.TaskDraft``); the domain's environment makes it
one of its own tasks (``Domain.make_task``), and the store keeps that task's JSON."""
from __future__ import annotations

import hashlib
import json
import random
from typing import Protocol

from evosyn.agents.generator_schema import GeneratorOut, closed_output, entity_ids
from evosyn.agents.plans import DefaultPrior, Infeasible, Plan, seeded_rng
from evosyn.envs.base import Domain, EnvTask, GoldAction, TaskDraft, UserScenario
from evosyn.envs.ontology import check_selection
from evosyn.envs.pack_errors import fault_line
from evosyn.envs.packs import UserPhrasing
from evosyn.envs.properties import PROPERTIES, Call, bucket, measure_all, min_writes
from evosyn.envs.replay import gold_digest
from evosyn.storage.records import Blueprint, SynthesisSpace, SynthTask


def challenge_text(phrasing: UserPhrasing) -> dict[str, str]:
    """How the task text tells the simulated user to play each interaction challenge, in the domain's words."""
    return {
        "missing_information": f"Do not give your {phrasing.identity_words[0]} in your first message; "
                               "give it when asked.",
        "ambiguous_preference": f"Start vaguely ('{phrasing.vague_hint}'); be precise only when asked.",
        "ambiguous_request": "Start vaguely; be precise only when asked.",
        "user_false_claim": "Claim that a previous agent already promised you this.",
        "preference_change": "When first asked to confirm, hesitate and ask to hear the details again; then agree.",
        "emotional_pressure": "Sound stressed and in a hurry.",
        "multi_intent_interleaving": "Bring up each further request only after the previous one is done.",
        "constraint_hidden_until_late": "Mention your payment preference only when asked to confirm.",
    }


class GenerationError(ValueError):
    """A blueprint that cannot become a task: recorded as a rejection, never kept."""


class Generator(Protocol):
    def generate(self, blueprint: Blueprint, space: SynthesisSpace) -> SynthTask: ...


# the builder realizes these itself (exactly, in one plan); other selected properties are realized by planning
# again with a new seed salt until the plan's gold actions measure as requested
NATIVE = frozenset({"num_write", "num_read"})


def plan_calls(domain: Domain, plan: Plan) -> list[Call]:
    """A plan's gold actions as the properties see them (each write is executed while planning: it changes state)."""
    out = []
    for action in plan.actions:
        who = "user" if len(action) > 2 and action[2] == "user" else "assistant"
        out.append(Call(action[0], action[1], domain.tool_kind(action[0], who) or "unknown", by_user=who == "user"))
    return out


class EmbeddedGenerator:
    """Deterministic, seeded task construction over the real environment DB (the domain pack's task builder).

    A selected property the builder does not realize itself (``NATIVE``) is realized by planning again, with a
    new seed salt, up to ``tries`` times, until the plan's gold actions measure as requested; the prior's
    suppressed buckets of unselected properties are kept only with their keep probability, drawn once per blueprint.
    """

    def __init__(self, domain: Domain, prior: DefaultPrior | None = None, tries: int = 24):
        self.domain, self.prior, self.tries = domain, prior or DefaultPrior(), tries
        self.pack = domain.pack
        try:
            self.builder = self.pack.task_builder(domain, self.prior)
        except NotImplementedError:
            raise GenerationError(f"domain {domain.name!r} has no embedded generator "
                                  "(its pack defines no task_builder)") from None

    def _plan(self, sel: dict[str, list[str]], blueprint_id: str, seed: int) -> Plan:
        want = {k: v[0] for k, v in sel.items() if k in PROPERTIES and k not in NATIVE and v}
        suppress = {k: b for k, b in self.prior.suppress.items() if k not in sel and b}
        if not want and not suppress:
            return self.builder.plan(sel, blueprint_id, seed)
        keys = [*want, *suppress]
        # a value only writes can show, while the write count is left to the prior: ask the builder for
        # enough writes (alternating the fewest needed and one more)
        need = min_writes(want) if "num_write" not in sel else 0
        last: Infeasible | None = None
        refused, drawn = 0, False
        for k in range(self.tries):
            ask = {**sel, "num_write": [bucket(need + k % 2)]} if need else sel
            try:
                plan = self.builder.plan(ask, blueprint_id if k == 0 else f"{blueprint_id}#{k}", seed)
            except Infeasible as exc:
                last, refused = exc, refused + 1
                if refused >= 3:  # the builder itself cannot realize the rest of the selection
                    break
                continue
            got = measure_all(plan_calls(self.domain, plan), self.pack, keys)
            missed = [f"{key}={got[key]}" for key, v in want.items() if got[key] != v]
            if missed:
                last = Infeasible(f"no plan in {k + 1} tries realizes {want} (last: {', '.join(missed)})")
                continue
            keep = min([self.prior.suppress[key].get(got[key], 1.0) for key in suppress], default=1.0)
            # one draw per blueprint, on its first plan that realizes the selection: a plan in a suppressed
            # bucket is kept with its keep probability, and once refused the blueprint is planned again outside
            # every suppressed bucket, so the bucket keeps `keep` of its natural share (planning again must not
            # give it a second chance)
            if keep >= 1.0 or (not drawn and seeded_rng(blueprint_id, seed, "prior").random() < keep):
                return plan
            drawn = True
            last = Infeasible(f"the prior suppresses {', '.join(f'{key}={got[key]}' for key in suppress)}")
        raise last or Infeasible(f"no plan in {self.tries} tries")

    def realizable(self, sel: dict[str, list[str]], blueprint_id: str, seed: int) -> str | None:
        """Why the builder cannot realize selection ``sel`` as blueprint ``blueprint_id`` (None: it can). The
        same seeded planning as ``generate``'s, so a selection that passes here is built there: the Planner asks
        before it spends a blueprint on a combination the generator would refuse as infeasible."""
        try:
            self._plan(sel, blueprint_id, seed)
        except Infeasible as exc:
            return str(exc)
        except Exception:  # a fault of the pack's builder is generate's to report, with where it was raised
            return None
        return None

    def generate(self, blueprint: Blueprint, space: SynthesisSpace) -> SynthTask:
        problems = check_selection(space, blueprint.selected_dimensions)
        if problems:
            raise GenerationError("blueprint outside the space: " + "; ".join(problems))
        try:
            plan = self._plan(blueprint.selected_dimensions, blueprint.blueprint_id, blueprint.seed)
            task_id = "syn-" + hashlib.sha256(f"{blueprint.blueprint_id}/{blueprint.seed}".encode()).hexdigest()[:12]
            task = self.domain.make_task(task_draft(task_id, blueprint, plan, self.domain.pack.phrasing))
            return synth_task(task, blueprint, scenario_of(plan, blueprint), "embedded", self.domain)
        except Infeasible as exc:
            raise GenerationError(f"infeasible: {exc}") from None
        except GenerationError:
            raise
        except Exception as exc:  # the pack's generator or a tool it ran: where in the pack, not only the type
            raise GenerationError(f"generator error: {fault_line(exc)}") from exc


def synth_task(task: EnvTask, blueprint: Blueprint, scenario: dict, generator: str, domain: Domain) -> SynthTask:
    """The stored row of a task made for ``blueprint``."""
    return SynthTask(run_id=blueprint.run_id, round=blueprint.round, space_version=blueprint.space_version,
                     direction_id=blueprint.direction_id, blueprint_id=blueprint.blueprint_id, task_id=task.id,
                     domain=blueprint.domain, tau2_task=task.to_json(), requested=blueprint.selected_dimensions,
                     scenario=scenario, generator=generator, gold_digest=gold_digest(domain, task))


def scenario_of(plan: Plan, blueprint: Blueprint) -> dict:
    return {"user_id": plan.user_id, "intents": plan.intents, "fillers": plan.fillers,
            "challenges": blueprint.selected_dimensions.get("interaction_challenge", []),
            "refusal": plan.refusal, "info": plan.info, **({"identity": plan.identity} if plan.identity else {}),
            **({"clarify": plan.clarify} if plan.clarify else {})}


def _gold_action(task_id: str, n: int, action: tuple) -> GoldAction:
    """(tool, arguments) is the agent's call; (tool, arguments, "user") a device action the user performs."""
    name, args = action[0], action[1]
    requestor = "user" if len(action) > 2 and action[2] == "user" else "assistant"
    return GoldAction(name=name, arguments=args, requestor=requestor, action_id=f"{task_id}-{n}")


def task_draft(task_id: str, blueprint: Blueprint, plan: Plan, phrasing: UserPhrasing,
               extra_instructions: str = "", notes: str = "") -> TaskDraft:
    """The task, family-free; ``phrasing``: how the domain's pack words the user's side."""
    sel = blueprint.selected_dimensions
    asks = [i["say"] for i in plan.intents]
    if plan.fillers:
        asks = [f"first, {'; '.join(plan.fillers)}"] + asks
    challenges = sel.get("interaction_challenge", [])
    texts = challenge_text(phrasing)
    instructions = [texts[c] for c in challenges if c in texts]
    if plan.refusal:
        instructions.append("If the agent explains that this is not allowed, accept it and end the call.")
    else:
        instructions.append("Confirm each change with 'yes' when the agent describes it.")
    behave = " ".join(instructions)
    if extra_instructions:
        behave = f"{behave} {extra_instructions}"
    return TaskDraft(
        id=task_id, purpose=blueprint.generation_intent,
        relevant_policies=", ".join(sel.get("policy_or_constraint_focus", [])),
        notes=notes or f"EvoSyn embedded generator; blueprint {blueprint.blueprint_id}",
        scenario=UserScenario(
            domain=blueprint.domain, reason_for_call="You want to " + "; then ".join(asks) + ".",
            known_info=plan.known_info or phrasing.known_identity.format(user_id=plan.user_id),
            unknown_info=phrasing.unknown_info, task_instructions=behave, persona=plan.persona),
        ticket="Customer " + plan.user_id + " wants to " + "; then ".join(asks) + ".",
        actions=[_gold_action(task_id, n, a) for n, a in enumerate(plan.actions)],
        communicate_info=plan.info, assertions=plan.assertions,
        reward_basis=plan.reward_basis or ["DB", "COMMUNICATE"], initial_state=plan.initial_state,
        extra=dict(plan.extra))


# ------------------------------------------------------------------ LLM-backed Generator
# the reply contract (GeneratorOut) and its closed form for a domain live in agents/generator_schema.py
def candidate_entities(domain: Domain, blueprint: Blueprint, k: int = 4) -> dict:
    """A seeded sample of real entities for the prompt (the domain pack's choice; default: example ids)."""
    rng = random.Random(int(hashlib.sha256(f"{blueprint.blueprint_id}/{blueprint.seed}".encode()).hexdigest()[:16],
                            16))
    return domain.pack.candidate_entities(domain, rng, k)


# said only where the domain has user tools (dual control): the prompts of the others are unchanged
DEVICE_TOOLS = ("\n\nTOOLS THE USER CALLS ON THEIR OWN DEVICE (dual control: the agent asks, the user acts; "
                "name, read/write kind, arguments):\n")
DEVICE_RULE = ("\n- A step the user performs on their own device (one of the user's tools above) is a gold action "
               "too, in its place in the order, with \"requestor\": \"user\"; the agent's own calls leave "
               "requestor out.")


def generator_messages(blueprint: Blueprint, env: dict, entities: dict,
                       device_tools: list[dict] | None = None) -> list[dict]:
    """``device_tools``: the user's tools (``evosyn.agents.ask.tools_summary(domain, "user")``) of a dual-control
    domain, which the gold actions may use with ``requestor: "user"``."""
    from evosyn.agents.ask import render

    bp = {"blueprint_id": blueprint.blueprint_id, "selected_dimensions": blueprint.selected_dimensions,
          "generation_intent": blueprint.generation_intent, "success_focus": blueprint.success_focus,
          "expected_difficulty_controls": blueprint.expected_difficulty_controls.model_dump(), "seed": blueprint.seed}
    device = DEVICE_TOOLS + json.dumps(device_tools, indent=1, sort_keys=True) if device_tools else ""
    text = render("generator.md", domain=blueprint.domain, tools=env.get("tools", []), policy=env.get("policy", ""),
                  blueprint=bp, entities=entities, device_tools=device, device_rule=DEVICE_RULE if device else "")
    return [{"role": "user", "content": text}]


def _bucket(n: int) -> str:
    return "5+" if n >= 5 else "3-4" if n >= 3 else str(n)


def parse_generator(out: GeneratorOut, blueprint: Blueprint, space: SynthesisSpace, domain: Domain) -> SynthTask:
    """A task whose gold actions name real tools with valid arguments and all execute cleanly."""
    from evosyn.agents.ask import Invalid

    sel = blueprint.selected_dimensions
    outcome = (sel.get("expected_outcome") or [""])[0]
    db = getattr(getattr(domain, "cow", None), "base", None)
    if db is not None and hasattr(db, "users") and out.user_id not in db.users:
        raise Invalid(f"user_id {out.user_id!r} is not a customer in the database")
    if not out.gold_actions:
        raise Invalid("gold_actions is empty: a task needs at least one tool call")
    episode, kinds = domain.episode(), []
    for n, a in enumerate(out.gold_actions):
        if domain.tool(a.name, a.requestor) is None:  # the other side's tool: say whose it is
            other = "user" if a.requestor == "assistant" else "assistant"
            if domain.tool(a.name, other) is not None:
                raise Invalid(f"gold action {n} ({a.name}) is a tool of the {other}"
                              + (", not the agent's: set requestor \"user\"" if other == "user" else
                                 ", not of the user's device: leave requestor out"))
        problem = domain.validate_arguments(a.name, a.arguments, a.requestor)
        if problem:
            raise Invalid(f"gold action {n} ({a.name}): {problem}")
        kinds.append(domain.tool_kind(a.name, a.requestor))
        obs = episode.step(a.name, a.arguments, a.requestor)
        if obs.error:
            raise Invalid(f"gold action {n} ({a.name} {a.arguments}) fails on the database: {obs.content[:200]}")
    writes, reads = kinds.count("write"), kinds.count("read")
    if outcome == "refuse":
        if writes:
            raise Invalid(f"a refused request changes no state, but gold_actions has {writes} write call(s)")
        if not out.refusal_rule.strip():
            raise Invalid("expected_outcome is refuse: refusal_rule must state the rule the request breaks")
    if "num_write" in sel and _bucket(writes) != sel["num_write"][0]:
        raise Invalid(f"num_write is {sel['num_write'][0]} but gold_actions has {writes} write call(s)")
    if "num_read" in sel and _bucket(reads) != sel["num_read"][0]:
        raise Invalid(f"num_read is {sel['num_read'][0]} but gold_actions has {reads} read call(s)")
    info = list(out.communicate_info) or (["cannot"] if outcome == "refuse" else [])
    # a device action is (tool, arguments, "user"), as the embedded builders write it (``_gold_action``)
    actions = [(a.name, dict(a.arguments), "user") if a.requestor == "user" else (a.name, dict(a.arguments))
               for a in out.gold_actions]
    plan = Plan(user_id=out.user_id, actions=actions,
                intents=[{"say": i.say, "arguments": i.arguments, "tool": None} for i in out.intents], info=info,
                refusal={"say": out.intents[-1].say, "rule": out.refusal_rule} if outcome == "refuse" else None,
                fillers=list(out.side_requests))
    task_id = "syn-" + hashlib.sha256(f"{blueprint.blueprint_id}/{blueprint.seed}/llm".encode()).hexdigest()[:12]
    draft = task_draft(task_id, blueprint, plan, domain.pack.phrasing, extra_instructions=out.task_instructions.strip(),
                       notes=f"EvoSyn LLM generator; blueprint {blueprint.blueprint_id}")
    try:
        task = domain.make_task(draft)
    except ValueError as exc:
        raise Invalid(str(exc).splitlines()[0]) from None
    return synth_task(task, blueprint, scenario_of(plan, blueprint), "llm", domain)


class LLMGenerator:
    def __init__(self, domain: Domain, client, env: dict, retries: int = 2):
        self.domain, self.client, self.env, self.retries = domain, client, env, retries
        self.raw: dict[str, str] = {}  # task id -> raw reply

    def generate(self, blueprint: Blueprint, space: SynthesisSpace) -> SynthTask:
        from evosyn.agents.ask import RoleRejected, ask, tools_summary

        problems = check_selection(space, blueprint.selected_dimensions)
        if problems:
            raise GenerationError("blueprint outside the space: " + "; ".join(problems))
        entities = candidate_entities(self.domain, blueprint)
        msgs = generator_messages(blueprint, self.env, entities, tools_summary(self.domain, "user"))
        try:
            # closed by the domain's tools, its ids those the prompt shows: a constrained decoder can neither add
            # argument keys nor write an id of its own until max_tokens
            schema = closed_output(self.domain, entity_ids(entities))
            ans = ask(self.client, msgs, schema=schema, role="generator", retries=self.retries,
                      validate=lambda out: parse_generator(out, blueprint, space, self.domain))
        except RoleRejected as exc:
            raise GenerationError(str(exc)) from None
        self.raw[ans.value.task_id] = ans.raw
        return ans.value
