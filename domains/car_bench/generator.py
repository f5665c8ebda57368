"""The embedded CAR-bench generator: a blueprint of the App. B.1 space as a plan of CAR-bench's task types.

Each plan realizes the requested values before the gate: ``task_family`` picks the
recipes (``recipes.py``), ``task_nature`` the task type (base; hallucination with a
tool, a parameter or a part of a tool's answer removed; disambiguation resolved from
the driver's preferences or by asking the driver), ``expected_behavior`` what the
gold conversation does (fulfil, decline, resolve from preferences, clarify),
``tool_use_pattern`` and ``state_precondition`` the recipe and what it is composed
with, ``interaction_challenge`` how the driver words it and ``difficulty_profile``
the number of gold calls (side lookups the driver asks for first fill it up). A
selection no recipe can realize is ``Infeasible``. The task's car
(``context_init_config``) starts from CAR-bench's defaults plus what the recipes need.
"""
from __future__ import annotations

import json
import random
from typing import Any

from evosyn.agents.plans import BUCKET_RANGE, Infeasible, Plan, seeded_rng
from evosyn.domains.car_bench import recipes as R
from evosyn.domains.car_bench.recipes import Op

NATURE_TYPES = {"base_execute": "base", "hallucination_missing_tool": "hallucination_missing_tool",
                "hallucination_missing_param": "hallucination_missing_tool_parameter",
                "hallucination_missing_result": "hallucination_missing_tool_response",
                "disambiguation_internal": "disambiguation_internal", "disambiguation_user": "disambiguation_user"}
CALLS = {"easy": (2, 3), "medium": (4, 5), "hard": (6, 8)}
TERMINATING = frozenset({"call_phone_by_number"})  # CAR-bench scores nothing after a phone call
PERSONAS = ["You are 34, drive to work every day and speak to the assistant briefly and to the point.",
            "You are 58, a careful driver who likes to be told what the car is doing.",
            "You are 26 and relaxed; you talk to the car like to a friend.",
            "You are 45 and busy; you often drive between meetings."]
# how each interaction challenge shapes the driver's words
CHALLENGE_LINES = {"persona_indirect": "You hint at what you want rather than naming the function.",
                   "underspecified_value": "You leave out the exact value at first and give it when asked.",
                   "distractor_context": "You mention what your day is like before getting to the point."}
# side lookups and further requests that bring a task to a difficulty or to requested counts: each reads, or
# changes from CAR-bench's default state, something no recipe's AUT-POL rule depends on
READ_FILLERS = [("tell me the car's color", ("get_car_color", {})),
                ("tell me which seats are occupied", ("get_seats_occupancy", {})),
                ("tell me the charge level", ("get_charging_specs_and_status", {})),
                ("tell me the climate settings", ("get_climate_settings", {})),
                ("tell me the window positions", ("get_vehicle_window_positions", {})),
                ("tell me how far the sunroof is open", ("get_sunroof_and_sunshade_position", {})),
                ("tell me whether the headlights are on", ("get_exterior_lights_status", {})),
                ("tell me the seat heating levels", ("get_seat_heating_level", {})),
                ("tell me the temperature set inside", ("get_temperature_inside_car", {})),
                ("tell me whether the trunk is open", ("get_trunk_door_position", {}))]
WRITE_FILLERS = [("switch on the passenger's reading light", ("set_reading_light", {"position": "PASSENGER",
                                                                                      "on": True})),
                 ("set the steering wheel heating to level 2", ("set_steering_wheel_heating", {"level": 2})),
                 ("switch on the low beams", ("set_head_lights_low_beams", {"on": True})),
                 ("open the sunshade fully", ("open_close_sunshade", {"percentage": 100})),
                 ("set the air circulation to fresh air", ("set_air_circulation", {"mode": "FRESH_AIR"})),
                 ("switch the rear window defrost on", ("set_window_defrost", {"on": True, "defrost_window": "REAR"}))]
Counts = tuple[tuple[int, int] | None, tuple[int, int] | None]  # (fewest, most) writes and reads requested
DISTRACTORS = ["It has been a long day at the office.", "I am on my way to pick up my daughter.",
               "The traffic was terrible this morning."]


class CarBenchGenerator:
    def __init__(self, domain: Any, prior: Any = None):
        self.domain = domain
        data = domain.data
        self.places = list(data.locations.values())
        self.contacts = list(data.contacts.values())
        self.calendars = sorted(data.calendars)
        self._route_cache: dict[tuple[str, str], list[dict]] = {}

    # ------------------------------------------------------------ the car each task starts in
    def _context(self, rng: random.Random) -> dict[str, Any]:
        home = rng.choice([p for p in self.places if self._routes(p["id"])] or self.places)
        return {"current_location": home, "state_of_charge": rng.choice([40, 55, 70, 85]),
                "current_datetime": {"year": 2025, "month": 3, "day": rng.randint(3, 27), "hour": rng.randint(7, 19),
                                     "minute": 0}}

    def _routes(self, start: str, destination: str | None = None) -> list[dict]:
        """The routes the environment knows from ``start`` (to ``destination``), looked up once each."""
        out = []
        for dest in [destination] if destination else [p["id"] for p in self.places if p["id"] != start]:
            if (start, dest) not in self._route_cache:
                obs = self.domain.episode(None).step("get_routes_from_start_to_destination",
                                                     {"start_id": start, "destination_id": dest})
                found = json.loads(obs.content) if not obs.error else {}
                self._route_cache[(start, dest)] = (found.get("result") or {}).get("routes", [])
            out += self._route_cache[(start, dest)]
        return out

    def _weather(self, ctx: dict) -> Any:
        when = ctx["current_datetime"]
        return lambda place: ("get_weather", {"location_or_poi_id": place, "month": when["month"], "day": when["day"],
                                              "time_hour_24hformat": when["hour"]})

    def _ops(self, family: str, rng: random.Random, ctx: dict) -> list[Op]:
        here = ctx["current_location"]["id"]
        weather = self._weather(ctx)
        make = {
            "climate_control": lambda: [R.temperature(rng), R.seat_heating(rng), R.air_conditioning(rng)],
            "window_and_body": lambda: [R.window(rng), R.sunroof(rng, weather(here)), R.ambient(rng),
                                        R.fog_lights(rng), R.trunk(rng)],
            "navigation": lambda: [R.navigation(rng, here, self.places, self._routes)],
            "charging": lambda: [R.charging(rng, ctx["state_of_charge"])],
            "communication": lambda: [R.call_contact(rng, self.contacts, email=False),
                                      R.call_contact(rng, self.contacts, email=True)],
            "info_query": lambda: [R.weather_info(rng, weather, self.places)],
        }
        if family not in make:
            raise Infeasible(f"task_family {family!r}: no CAR-bench recipe")
        return make[family]()

    # ------------------------------------------------------------ one plan
    def plan(self, sel: dict[str, list[str]], blueprint_id: str, seed: int) -> Plan:
        rng = seeded_rng(blueprint_id, seed)
        one = lambda key, default: (sel.get(key) or [default])[0]  # noqa: E731
        family, nature = one("task_family", "climate_control"), one("task_nature", "base_execute")
        behavior, pattern = one("expected_behavior", "fulfill_reach_goal"), one("tool_use_pattern", "single_set")
        pre = one("state_precondition", "no_precondition")
        low, high = CALLS[one("difficulty_profile", "easy")]
        ctx = self._context(rng)
        task_type = NATURE_TYPES.get(nature)
        if task_type is None:
            raise Infeasible(f"task_nature {nature!r}: no CAR-bench task type")
        last = Infeasible(f"no {nature} / {behavior} recipe for {family}")
        ops = self._candidates(self._ops(family, rng, ctx), nature, behavior, pattern, pre, rng)
        rng.random()  # the draw the requested counts once took here: the tasks of other requests stay as they were
        counts = self._counts(sel)
        if counts is not None:  # recipes whose calls, as the task type makes them, fit the requested counts first
            ops.sort(key=lambda op: not self._fits(op, nature, behavior, counts))
        for op in ops:
            try:
                return self._build(op, sel, ctx, rng, task_type, (low, high))
            except Infeasible as exc:  # too many or too few calls for the difficulty: the next recipe
                last = exc
        raise last

    def _build(self, op: Op, sel: dict[str, list[str]], ctx: dict, rng: random.Random, task_type: str,
               calls: tuple[int, int]) -> Plan:
        one = lambda key, default: (sel.get(key) or [default])[0]  # noqa: E731
        nature, behavior = one("task_nature", "base_execute"), one("expected_behavior", "fulfill_reach_goal")
        pattern, challenge = one("tool_use_pattern", "single_set"), one("interaction_challenge", "cooperative_clear")
        actions, say, refusal, removed, clarify, prefs = self._realize(op, nature, behavior)
        extra_ops = self._compose(op, pattern, one("task_family", ""), rng, ctx) if not refusal else []
        counts = self._counts(sel)
        if counts is not None:  # the requested counts come first: a composed request that exceeds them is left out
            extra_ops = [o for o in extra_ops if self._within(actions + o.actions, counts)][:1]
        elif len(actions) + sum(len(o.actions) for o in extra_ops) > calls[1]:
            extra_ops = []  # the difficulty's call count comes first: the request stays a single one
        for more in extra_ops:
            if any(a[0] in TERMINATING for a in actions):  # a phone call ends the conversation: it comes last
                actions, say = more.actions + actions, f"{more.say}; then {say}"
            else:
                actions, say = actions + more.actions, f"{say}; then {more.say}"
        if counts is not None:  # the write and read counts a blueprint requests come before the difficulty
            more, fillers = self._to_counts(actions, counts, refusal is not None, rng)
            if more and any(a[0] in TERMINATING for a in actions):  # a phone call ends it: further requests first
                actions, say = [c for _, c in more] + actions, "; then ".join([*(m for m, _ in more), say])
            else:
                actions, say = actions + [c for _, c in more], "; then ".join([say, *(m for m, _ in more)])
            info = list(op.info)
        else:
            fillers, info = self._fill(list(actions), *calls, rng, op)
        actions = [call for _, call in fillers] + actions
        config = {**ctx, **op.config, **{k: v for o in extra_ops for k, v in o.config.items()}}
        if prefs:
            config["user_preferences"] = prefs
        if counts is not None and counts[0] is not None:
            self._writes_change(actions, config)
        if challenge == "distractor_context":
            say = f"{rng.choice(DISTRACTORS).rstrip('.').lower()}, so {say}"
        lines = [CHALLENGE_LINES[challenge]] if challenge in CHALLENGE_LINES else []
        known = "You are sitting in your car and talk to its voice assistant."
        return Plan(user_id="driver", actions=actions, intents=[{"say": say, "tool": None, "arguments": {}}],
                    info=info, refusal=refusal, fillers=[f for f, _ in fillers], known_info=known,
                    identity="I am in my car.",
                    initial_state={"context_init_config": config, "calendar_id": rng.choice(self.calendars),
                                   "removed_part": removed},
                    persona=rng.choice(PERSONAS) + (" " + " ".join(lines) if lines else ""),
                    clarify=clarify, extra={"task_type": task_type, **self._elements(nature, op)})

    def _candidates(self, ops: list[Op], nature: str, behavior: str, pattern: str, pre: str,
                    rng: random.Random) -> list[Op]:
        """The recipes that realize the task type and behavior, the requested pattern and precondition first."""
        def usable(op: Op) -> bool:
            need = {"hallucination_missing_param": bool(op.param), "hallucination_missing_result": bool(op.result),
                    "disambiguation_internal": bool(op.pref), "disambiguation_user": bool(op.ask)}
            wants = {"resolve_from_preferences": bool(op.pref), "clarify_with_user": bool(op.ask),
                     "decline_infeasible": bool(op.decline) or nature.startswith("hallucination")}
            return need.get(nature, True) and wants.get(behavior, True)

        def score(op: Op) -> tuple[int, float]:
            confirm = op.main in ("open_close_trunk_door", "send_email")
            return (op.precondition == pre) + ((pattern == "confirmation_required") == confirm), rng.random()

        return sorted((op for op in ops if usable(op)), key=score, reverse=True)

    def _realize(self, op: Op, nature: str, behavior: str):
        """(gold actions, the request, refusal, removed parts, clarification, preferences) of the task type."""
        refusal, removed, clarify, prefs = None, [], None, None
        if nature.startswith("hallucination"):
            reads = [a for a in op.actions if self.domain.tool_kind(a[0]) == "read" and a[0] != op.main]
            if nature == "hallucination_missing_tool":
                removed, rule, say = [op.main], f"this car offers no function to {op.say}", op.say
            elif nature == "hallucination_missing_param":
                tool, param = op.param.split(".")
                removed, say = [op.param], op.say
                rule = f"the {tool.replace('_', ' ')} function cannot take the {param.replace('_', ' ')} here"
            else:
                say, removed, read, unknown = op.result[0], [op.result[1]], op.result[2], op.result[3]
                reads, rule = [read], f"the car does not report {unknown} at the moment"
            return reads, say, {"say": say, "rule": rule}, removed, None, None
        if behavior == "decline_infeasible":
            say, reads, rule = op.decline  # type: ignore[misc]
            return reads, say, {"say": say, "rule": rule}, removed, None, None
        if nature == "disambiguation_internal" or behavior == "resolve_from_preferences":
            say, _, prefs, actions = op.pref  # type: ignore[misc]
            return actions, say, None, removed, None, prefs
        if nature == "disambiguation_user" or behavior == "clarify_with_user":
            clarify = {"ask": op.ask, "answer": op.answer}
            return op.actions, op.vague, None, removed, clarify, None
        return op.actions, op.say, None, removed, None, None

    def _compose(self, op: Op, pattern: str, family: str, rng: random.Random, ctx: dict) -> list[Op]:
        """More requests the pattern needs: a second write of the family, or one of another group."""
        writes = sum(self.domain.tool_kind(a[0]) == "write" for a in op.actions)
        if pattern == "multi_step_sequence" and writes < 2:
            mine = {a[0] for a in op.actions}
            others = [o for o in self._ops(family, rng, ctx) if not mine & {a[0] for a in o.actions}
                      and any(self.domain.tool_kind(a[0]) == "write" for a in o.actions)]
            return [rng.choice(others)] if others else [R.trunk(rng)]
        if pattern == "cross_domain_compose" and len(op.groups) < 2:
            other = "info_query" if "weather" not in op.groups else "climate_control"
            return [rng.choice(self._ops(other, rng, ctx))]
        if pattern == "confirmation_required" and op.main not in ("open_close_trunk_door", "send_email"):
            return [R.trunk(rng)]
        return []

    def _fill(self, actions: list, low: int, high: int, rng: random.Random, op: Op):
        """Side lookups the driver asks for first, until the gold calls reach the difficulty's range:
        ([(what the driver asks, the call)], what the assistant tells)."""
        lookups = list(READ_FILLERS)
        used = {a[0] for a in actions}
        rng.shuffle(lookups)
        fillers = []
        for say, call in lookups:
            if len(actions) + len(fillers) >= low:
                break
            if call[0] not in used:
                fillers.append((say, call))
        if not low <= len(actions) + len(fillers) <= high:
            raise Infeasible(f"{len(actions) + len(fillers)} gold calls, outside the difficulty's {low}-{high}")
        return fillers, list(op.info)

    def _writes_change(self, actions: list, config: dict) -> None:
        """``Infeasible`` when a gold write leaves the car as it was (a temperature it is already at): the
        verifier counts only writes that change the state, so a requested write count would not be shown."""
        episode = self.domain.episode(config)
        for name, arguments, *_ in actions:
            before = episode.state_digest() if self.domain.tool_kind(name) == "write" else None
            episode.step(name, arguments)
            if before is not None and episode.state_digest() == before:
                raise Infeasible(f"{name}{arguments} changes nothing in this car")

    def _tally(self, actions: list) -> tuple[int, int]:
        kinds = [self.domain.tool_kind(a[0]) for a in actions]
        return kinds.count("write"), kinds.count("read")

    def _within(self, actions: list, counts: Counts) -> bool:
        """Whether ``actions`` make at most the top of each requested count's bucket."""
        return all(want is None or n <= want[1] for n, want in zip(self._tally(actions), counts))

    def _fits(self, op: Op, nature: str, behavior: str, counts: Counts) -> bool:
        """Whether the recipe's gold calls, as the task type makes them, fit the requested counts."""
        return self._within(self._realize(op, nature, behavior)[0], counts)

    @staticmethod
    def _counts(sel: dict[str, list[str]]) -> Counts | None:
        """The (fewest, most) writes and reads the blueprint's buckets ask for (None each when it does not
        ask), None for neither."""
        want = [BUCKET_RANGE[sel[k][0]] if sel.get(k) and sel[k][0] in BUCKET_RANGE else None
                for k in ("num_write", "num_read")]
        return None if want == [None, None] else (want[0], want[1])

    def _to_counts(self, actions: list, counts: Counts, refused: bool, rng: random.Random):
        """Further requests (writes, asked after the main one) and side lookups (reads, asked first) that bring
        the gold calls into the requested buckets (a count drawn in the bucket, at least what the request
        makes); ``Infeasible`` when the request already makes more, or a refusal is asked to write."""
        writes, reads = self._tally(actions)
        (want_w, want_r), targets = counts, []
        for kind, have, want in (("writes", writes, want_w), ("reads", reads, want_r)):
            if want is not None and (have > want[1] or (kind == "writes" and refused and want[0] > 0)):
                raise Infeasible(f"the request makes {have} {kind}, {'-'.join(map(str, sorted(set(want))))} "
                                 "requested")
            targets.append(have if want is None else rng.randint(max(want[0], have), want[1]))
        used = {a[0] for a in actions}
        extra_w = [(say, call) for say, call in WRITE_FILLERS if call[0] not in used]
        extra_r = [(say, call) for say, call in READ_FILLERS if call[0] not in used]
        rng.shuffle(extra_w)
        rng.shuffle(extra_r)
        more, fillers = extra_w[:targets[0] - writes], extra_r[:targets[1] - reads]
        if len(more) < targets[0] - writes or len(fillers) < targets[1] - reads:
            raise Infeasible("not enough further requests for the requested counts")
        return more, fillers

    @staticmethod
    def _elements(nature: str, op: Op) -> dict[str, str]:
        if nature == "disambiguation_internal":
            return {"disambiguation_element_internal": f"the value of {op.main} from the driver's preferences"}
        if nature == "disambiguation_user":
            return {"disambiguation_element_user": f"the value of {op.main} the driver gives when asked"}
        return {}
