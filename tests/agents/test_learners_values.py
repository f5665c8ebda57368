"""The embedded learner writes values as the user and the observations wrote them.

A second made-up domain (a parcel office), whose values have the shapes the
first toy domain lacks: a code with a leading '#', a postcode of digits that the
tool takes as text (and may start with 0), a multi-word address given as a
comma-separated list, a reason that only the tool description quotes, a list
argument of plain strings read from an observation, and a user who says "I am
A B". A learner that cannot form one of these values cannot complete a single
task (the embedded learner once passed no write task of a domain shaped so).
"""
import json
import random

import pytest

from evosyn.agents.learners.dialogue import split_message
from evosyn.agents.learners.embedded import EmbeddedLearner
from evosyn.envs.gold import confirmation_request
from evosyn.storage.records import Message, ToolCall, Trajectory
from tests.agents.toy_play import play as toy_play

WHY = ("arrived damaged", "never arrived")
LABELS = ["Blue Kettle", "Red Mug", "Green Lamp", "Steel Pan", "Oak Tray", "Glass Jar", "Wool Scarf"]
STREETS = ["Birch Road", "Mill Lane", "Harbor Street", "Kings Way", "Elm Court"]
TOWNS = ["Lakeside", "Brookfield", "Westport", "Fairview", "Ashby"]
FIRST = ["Ann", "Omar", "Lena", "Raj", "Tess", "Hugo"]
LAST = ["Lee", "Berg", "Costa", "Novak", "Ibsen"]


def _fn(name: str, props: dict) -> dict:
    return {"type": "function", "function": {"name": name, "description": name, "parameters": {
        "type": "object", "properties": props, "required": list(props)}}}


S = {"type": "string"}
TOOLS = [_fn("find_customer", {"first_name": S, "last_name": S, "postcode": S}),
         _fn("get_parcel", {"ref": {"type": "string", "description": "The reference, such as '#P00000'."}}),
         _fn("resend_parcel", {"ref": S, "street": S, "unit": S, "town": S,
                               "why": {"type": "string", "description": "Either 'arrived damaged' or 'never arrived'."},
                               "pieces": {"type": "array", "items": S}})]


class Office:
    def __init__(self, rng: random.Random):
        self.ref = f"#P{rng.randrange(10000, 99999)}"
        self.first, self.last = rng.choice(FIRST), rng.choice(LAST)
        self.postcode = f"{rng.randrange(0, 99999):05d}"
        self.customer = f"cu_{rng.randrange(1000, 9999)}"
        labels = rng.sample(LABELS, 3)
        self.pieces = [{"label": lab, "piece_no": str(rng.randrange(10 ** 9, 10 ** 10)), "weight": rng.randrange(1, 9)}
                       for lab in labels]
        self.wanted = rng.randrange(3)
        self.street = f"{rng.randrange(2, 999)} {rng.choice(STREETS)}"
        self.unit = f"Unit {rng.randrange(1, 99)}"
        self.town = rng.choice(TOWNS)
        self.why = rng.choice(WHY)
        self.resent: dict | None = None

    def opening(self) -> str:
        why = "it arrived damaged" if self.why == WHY[0] else "it never arrived"
        return (f"I would like to resend the {self.pieces[self.wanted]['label']} of parcel {self.ref} to "
                f"{self.street}, {self.unit}, {self.town} because {why}. "
                f"I am {self.first} {self.last} and my postcode is {self.postcode}.")

    def step(self, name: str, args: dict) -> str:
        if name == "find_customer":
            ok = (args.get("first_name"), args.get("last_name"), args.get("postcode")) == (
                self.first, self.last, self.postcode)
            return self.customer if ok else "Error: no such customer"
        if name == "get_parcel":
            return json.dumps({"ref": self.ref, "pieces": self.pieces}) if args.get("ref") == self.ref else \
                "Error: no such parcel"
        if name == "resend_parcel":
            self.resent = dict(args)
            return json.dumps({"ref": args.get("ref"), "status": "resent"})
        return "Error: unknown tool"

    def gold(self) -> dict:
        return {"ref": self.ref, "street": self.street, "unit": self.unit, "town": self.town, "why": self.why,
                "pieces": [self.pieces[self.wanted]["piece_no"]]}


def teacher(office: Office, n: int) -> Trajectory:
    msgs = [Message(role="user", content=office.opening())]

    def call(name: str, args: dict) -> None:
        k = sum(1 for m in msgs if m.tool_calls)
        msgs.append(Message(role="assistant", tool_calls=[ToolCall(id=f"c{k}", name=name, arguments=args)]))
        msgs.append(Message(role="tool", content=office.step(name, args), tool_call_id=f"c{k}"))

    call("find_customer", {"first_name": office.first, "last_name": office.last, "postcode": office.postcode})
    call("get_parcel", {"ref": office.ref})
    msgs.append(Message(role="assistant", content=confirmation_request("resend_parcel", office.gold())))
    msgs.append(Message(role="user", content="Yes, please go ahead."))
    call("resend_parcel", office.gold())
    msgs.append(Message(role="assistant", content="Is there anything else I can help you with?"))
    msgs.append(Message(role="user", content="No, that is everything."))
    msgs.append(Message(role="assistant", content="Goodbye."))
    return Trajectory(run_id="t", round=0, space_version=1, direction_id="d", blueprint_id="b",
                      trajectory_id=f"parcel-{n}", task_id=f"parcel-{n}", messages=msgs, producer="teacher")


def play(learner: EmbeddedLearner, office: Office, max_steps: int = 16) -> list[Message]:
    """The learner at the office, against a user who confirms only the request they made."""
    return toy_play(learner, TOOLS, office, office.ref, max_steps)


@pytest.fixture(scope="module")
def learner():
    rng = random.Random(0)
    return EmbeddedLearner(seed=0).fit([teacher(Office(rng), i) for i in range(80)], TOOLS)


def test_values_are_read_in_the_shapes_the_user_wrote_them():
    clauses, identity = split_message("I would like to resend the Red Mug of parcel #P01234 to 12 Mill Lane, "
                                      "Unit 4, Ashby because it never arrived. I am Ann Lee and my postcode is 01234.", 0)
    assert "#P01234" in clauses[0].keys  # the '#' is part of the code
    assert {"12 Mill Lane", "Unit 4", "Ashby"} <= set(clauses[0].phrases)  # items of a comma-separated list
    assert [m.value for m in identity] == ["Ann Lee", "01234"]  # "I am ...": identity; a leading 0 keeps it text


def test_the_parcel_office_is_learned_from_its_trajectories_alone(learner):
    rng = random.Random(99)
    offices = [Office(rng) for _ in range(20)]
    for office in offices:
        play(learner, office)
    exact = sum(o.resent == o.gold() for o in offices)
    assert exact >= 17, [(o.resent, o.gold()) for o in offices if o.resent != o.gold()][:3]
    assert learner.writes == {"resend_parcel"}
