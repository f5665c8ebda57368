"""The embedded learner reads what its system prompt states, and learns an object argument's vocabulary.

A made-up shuttle desk, nowhere in the learner: the ride starts where the shuttle is, which only the system
prompt says (``HERE = {...}``, as CAR-bench's prompt gives the car's location), and its options are an object
argument whose value (``{"quiet": true}`` or ``{"luggage": true}``) the request's words choose. The request names no
value (no id, number or full name), as most CAR-bench requests do, so the seat (an enum) is read from all the user
said.
"""
import json
import random

import numpy as np
import pytest

from evosyn.agents.learners.embedded import EmbeddedLearner
from evosyn.agents.learners.prompt import stated_values, system_split
from evosyn.envs.gold import confirmation_request
from evosyn.storage.records import Message, ToolCall, Trajectory
from tests.agents.toy_play import play


def _fn(name: str, props: dict) -> dict:
    return {"type": "function", "function": {"name": name, "description": name, "parameters": {
        "type": "object", "properties": props, "required": list(props)}}}


TOOLS = [_fn("find_stop", {"name": {"type": "string"}}),
         _fn("book_ride", {"from_id": {"type": "string"}, "to_id": {"type": "string"},
                           "options": {"type": "object", "description": "the ride's options (true)"},
                           "seat": {"type": "string", "enum": ["FRONT", "BACK", "WINDOW"]}})]
STOPS = ["Oakfield", "Riverside", "Hillcrest", "Brookside", "Maplewood", "Lakeview", "Stonegate", "Elmhurst"]
WANTS = {"a quiet ride": {"quiet": True}, "room for my luggage": {"luggage": True},
         "a ride with wheelchair access": {"step_free": True}}


CLOSING = (("assistant", "Is there anything else I can help you with?"), ("user", "No, that is everything."),
           ("assistant", "Have a good ride."), ("user", "Thanks, bye."))


class Shuttle:
    def __init__(self, rng: random.Random):
        self.here = f"st-{rng.randrange(1000, 9999)}"
        self.dest = rng.choice(STOPS)
        self.dest_id = f"st-{rng.randrange(1000, 9999)}"
        self.want = rng.choice(sorted(WANTS))
        self.seat = rng.choice(["FRONT", "BACK", "WINDOW"])
        self.booked: dict | None = None

    def policy(self) -> str:
        return ("# Shuttle desk\nBook rides for riders.\n## Context\n"
                f"- The shuttle is at HERE = {json.dumps({'stop_id': self.here, 'zone': 'north'})}.\n")

    def opening(self) -> str:
        return f"Please book me {self.want} to {self.dest}, a {self.seat.lower()} seat."

    def step(self, name: str, args: dict) -> str:
        if name == "find_stop":
            return json.dumps({"stop_id": self.dest_id if args.get("name") == self.dest else "st-0000"})
        if name == "book_ride":
            self.booked = dict(args)
            return json.dumps({"ride": "booked"})
        return "Error: unknown tool"

    def gold(self) -> dict:
        return {"from_id": self.here, "to_id": self.dest_id, "options": WANTS[self.want], "seat": self.seat}


def teacher(s: Shuttle, n: int, with_policy: bool = True) -> Trajectory:
    msgs = ([Message(role="system", content=s.policy())] if with_policy else []) + \
        [Message(role="user", content=s.opening())]

    def call(name: str, args: dict) -> None:
        k = sum(1 for m in msgs if m.tool_calls)
        msgs.append(Message(role="assistant", tool_calls=[ToolCall(id=f"c{k}", name=name, arguments=args)]))
        msgs.append(Message(role="tool", content=s.step(name, args), tool_call_id=f"c{k}"))

    call("find_stop", {"name": s.dest})
    msgs.extend(Message(role=r, content=t) for r, t in (("assistant", confirmation_request("book_ride", s.gold())),
                                                         ("user", "Yes, please go ahead.")))
    call("book_ride", s.gold())
    msgs.extend(Message(role=r, content=t) for r, t in CLOSING)
    return Trajectory(run_id="t", round=0, trajectory_id=f"sh-{n}", task_id=f"sh-{n}", messages=msgs)


def _trained(with_policy: bool, n: int = 80) -> EmbeddedLearner:
    rng = random.Random(0)
    return EmbeddedLearner(seed=0).fit([teacher(Shuttle(rng), i, with_policy) for i in range(n)], TOOLS)


def _booked(learner: EmbeddedLearner, n: int = 30) -> list[tuple[Shuttle, dict | None]]:
    rng, out = random.Random(99), []
    for _ in range(n):
        s = Shuttle(rng)
        play(learner, TOOLS, s, s.dest_id, policy=s.policy())
        out.append((s, s.booked))
    return out


@pytest.fixture(scope="module")
def learner():
    return _trained(True)


def test_stated_values_are_the_objects_a_prompt_states_by_name():
    text = 'Rules.\n- The car is at CURRENT_LOCATION = {"id": "loc_1", "name": "Ulm"}.\n- Now = {"hour": 9} and {x}'
    assert json.loads(stated_values(text)) == {"current_location": {"id": "loc_1", "name": "Ulm"}, "now": {"hour": 9}}
    assert stated_values("A policy in prose: no values, {not json} either.") == ""
    assert stated_values("") == ""


def test_a_ride_starts_where_the_prompt_says_the_shuttle_is(learner):
    rides = _booked(learner)
    right = sum(b is not None and b.get("from_id") == s.here for s, b in rides)
    assert right >= 27, [(s.here, b) for s, b in rides]


def test_without_the_prompt_in_its_data_the_learner_cannot_know_where_the_ride_starts():
    rides = _booked(_trained(False))
    assert not any(b is not None and b.get("from_id") == s.here for s, b in rides)


def test_an_object_argument_is_chosen_from_the_objects_the_data_gives_it(learner):
    assert sorted(learner.objects["book_ride.options"]) == sorted(json.dumps(v, sort_keys=True)
                                                                  for v in WANTS.values())
    rides = _booked(learner)
    right = sum(b is not None and b.get("options") == WANTS[s.want] for s, b in rides)
    assert right >= 27, [(s.want, b) for s, b in rides]


def test_a_request_that_names_no_value_is_still_read_for_its_words(learner):
    from evosyn.agents.learners.dialogue import track

    s = Shuttle(random.Random(7))
    assert track([Message(role="user", content=s.opening())], set()).clauses == []  # no clause to read
    rides = _booked(learner)
    right = sum(b is not None and b.get("seat") == s.seat for s, b in rides)
    assert right >= 27, [(s.seat, b) for s, b in rides]


def test_a_prompt_that_states_nothing_changes_no_weight():
    """A domain whose policy states no values (tau2's) trains the same model with its prompt as without."""
    rng = random.Random(3)
    shuttles = [Shuttle(rng) for _ in range(40)]
    plain = [teacher(s, i, with_policy=False) for i, s in enumerate(shuttles)]
    prose = [t.model_copy(update={"messages": [Message(role="system", content="Be kind. Confirm writes."),
                                               *t.messages]}) for t in plain]
    assert system_split(prose)[0] == [""] * 40
    a, b = EmbeddedLearner(seed=0).fit(plain, TOOLS), EmbeddedLearner(seed=0).fit(prose, TOOLS)
    for model in ("action", "argument"):
        assert np.array_equal(getattr(a, model).coef_, getattr(b, model).coef_)
