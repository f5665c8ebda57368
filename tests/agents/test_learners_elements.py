"""Lists of scalars chosen element by element: as many items as the request names, in its sequence.

A made-up swap counter (nowhere in the learner): a basket holds a few goods, each with its own number and two
options (a material of its own kind, and a size); the user asks to swap one or more of them ("the red Mug (size S) for the one with ... and the ...") and
the call takes two lists of numbers, the goods and what each becomes, pair by pair.
"""
import json
import random

import pytest

from evosyn.agents.learners.elements import element_schema, equal_lengths, extended, picked
from evosyn.agents.learners.embedded import EmbeddedLearner
from evosyn.agents.learners.features import Candidate
from evosyn.envs.gold import confirmation_request
from evosyn.storage.records import Message, ToolCall, Trajectory
from tests.agents.toy_play import play as toy_play

GOODS = {"Mug": ["clay", "glass", "steel"], "Lamp": ["brass", "paper", "bamboo"], "Kettle": ["copper", "enamel", "iron"],
         "Scarf": ["wool", "silk", "linen"], "Clock": ["walnut", "marble", "chrome"], "Vase": ["crystal", "stone", "resin"]}
SIZES = ["small", "medium", "large"]
IDS = {"type": "array", "items": {"type": "string"}}


def _fn(name: str, props: dict) -> dict:
    return {"type": "function", "function": {"name": name, "description": name, "parameters": {
        "type": "object", "properties": props, "required": list(props)}}}


TOOLS = [_fn("get_basket", {"code": {"type": "string"}}),
         _fn("get_good", {"good_no": {"type": "string"}}),
         _fn("swap_goods", {"code": {"type": "string"}, "numbers": IDS, "new_numbers": IDS})]


def _num(rng: random.Random) -> str:
    return str(rng.randrange(10 ** 9, 10 ** 10))


class Counter:
    def __init__(self, rng: random.Random, k: int):
        self.code = f"B{rng.randrange(1000, 9999)}"
        names = rng.sample(sorted(GOODS), 3)
        self.goods = []
        for name in names:
            variants = [{"number": _num(rng), "color": c, "size": s} for c, s in
                        rng.sample([(c, s) for c in GOODS[name] for s in SIZES], 4)]
            self.goods.append({"name": name, "good_no": _num(rng), "variants": variants})
        self.swaps = [(g, g["variants"][0], g["variants"][rng.randrange(1, 4)]) for g in rng.sample(self.goods, k)]
        self.done: dict | None = None

    def opening(self) -> str:
        what = " and ".join(f"the {g['name']} (material {old['color']}, size {old['size']}) for the one with "
                            f"material {new['color']}, size {new['size']}" for g, old, new in self.swaps)
        return f"I would like to swap {what} in basket {self.code}."

    def step(self, name: str, args: dict) -> str:
        if name == "get_basket":
            return json.dumps({"code": self.code, "goods": [
                {"name": g["name"], "good_no": g["good_no"], "number": g["variants"][0]["number"],
                 "options": {"material": g["variants"][0]["color"], "size": g["variants"][0]["size"]}}
                for g in self.goods]})
        if name == "get_good":
            g = next((g for g in self.goods if g["good_no"] == args.get("good_no")), None)
            if g is None:
                return "Error: no such good"
            return json.dumps({"name": g["name"], "good_no": g["good_no"], "variants": {
                v["number"]: {"number": v["number"], "options": {"material": v["color"], "size": v["size"]}}
                for v in g["variants"]}})
        if name == "swap_goods":
            self.done = dict(args)
            return json.dumps({"code": self.code, "status": "swapped"})
        return "Error: unknown tool"

    def gold(self) -> dict:
        return {"code": self.code, "numbers": [old["number"] for _, old, _ in self.swaps],
                "new_numbers": [new["number"] for _, _, new in self.swaps]}


def teacher(counter: Counter, n: int) -> Trajectory:
    msgs = [Message(role="user", content=counter.opening())]

    def call(name: str, args: dict) -> None:
        k = sum(1 for m in msgs if m.tool_calls)
        msgs.append(Message(role="assistant", tool_calls=[ToolCall(id=f"c{k}", name=name, arguments=args)]))
        msgs.append(Message(role="tool", content=counter.step(name, args), tool_call_id=f"c{k}"))

    call("get_basket", {"code": counter.code})
    for g, _, _ in counter.swaps:
        call("get_good", {"good_no": g["good_no"]})
    msgs.append(Message(role="assistant", content=confirmation_request("swap_goods", counter.gold())))
    msgs.append(Message(role="user", content="Yes, please go ahead."))
    call("swap_goods", counter.gold())
    msgs.append(Message(role="assistant", content="Is there anything else I can help you with?"))
    msgs.append(Message(role="user", content="No, that is everything."))
    msgs.append(Message(role="assistant", content="All done."))
    return Trajectory(run_id="t", round=0, space_version=1, direction_id="d", blueprint_id="b",
                      trajectory_id=f"swap-{n}", task_id=f"swap-{n}", messages=msgs, producer="teacher")


@pytest.fixture(scope="module")
def learner():
    rng = random.Random(0)
    return EmbeddedLearner(seed=0).fit([teacher(Counter(rng, rng.choice([1, 1, 2, 3])), i) for i in range(80)],
                                       TOOLS)


@pytest.mark.parametrize("k", [2, 3])
def test_a_request_naming_several_things_gets_a_list_of_as_many_in_its_sequence(learner, k):
    rng = random.Random(100 + k)
    right = 0
    for _ in range(10):
        counter = Counter(rng, k)
        toy_play(learner, TOOLS, counter, counter.code)
        right += counter.done == counter.gold()
    assert right >= 7, right  # the lists hold k items, each its own pair, in the request's sequence


def test_one_thing_named_is_a_list_of_one(learner):
    rng = random.Random(7)
    right = 0
    for _ in range(10):
        counter = Counter(rng, 1)
        toy_play(learner, TOOLS, counter, counter.code)
        right += counter.done == counter.gold()
    assert right >= 8, right


def test_the_lists_the_data_always_gives_one_length_are_tied_and_others_are_not():
    def traj(args: dict) -> Trajectory:
        msgs = [Message(role="assistant", tool_calls=[ToolCall(id="a", name="swap", arguments=args)])]
        return Trajectory(run_id="t", round=0, space_version=1, direction_id="d", blueprint_id="b",
                          trajectory_id="x", task_id="x", messages=msgs, producer="teacher")

    same = [traj({"a": ["1", "2"], "b": ["3", "4"]}), traj({"a": ["1"], "b": ["3"]})]
    assert equal_lengths(same) == {"swap": ["a", "b"]}
    assert equal_lengths(same + [traj({"a": ["1", "2"], "b": ["3"]})]) == {}


def test_an_array_of_scalars_is_chosen_by_element_and_an_array_of_objects_is_not():
    assert element_schema({}, IDS) == {"type": "string"}
    assert element_schema({}, {"type": "array", "items": {"type": "object", "properties": {"x": {}}}}) is None
    assert element_schema({}, {"type": "string"}) is None


def _cands(parts: list[int]) -> list[Candidate]:
    out = []
    for i, p in enumerate(parts):
        c = Candidate(f"v{i}", "obs", "number")
        c.__dict__["_part"] = p
        out.append(c)
    return out


def test_one_element_per_part_in_the_parts_sequence_and_a_tied_list_filled_from_the_missing_part():
    cands = _cands([1, 0, 0, 1, 4])  # part 4: no part (the learner's MAX_PARTS)
    scores = [0.9, 0.8, 0.7, 0.6, 0.95]
    assert [cands[i].value for i in picked(cands, scores)] == ["v1", "v0"]  # part 0 then part 1; v4 names none
    assert picked(cands, [0.1, 0.2, 0.3, 0.2, 0.1]) == [2]  # nothing likely: the best one alone
    one = picked(cands, [0.9, 0.2, 0.1, 0.3, 0.1])
    assert [cands[i].value for i in extended(cands, [0.9, 0.2, 0.1, 0.3, 0.1], one, 2)] == ["v1", "v0"]
