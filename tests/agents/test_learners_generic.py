"""The embedded learner knows no domain: it learns a made-up one from its trajectories alone.

The toy domain (a locker rental desk) exists only in this file: its tools, its
observations and its arithmetic (the amount is the locker's daily rate, which
only an observation shows, times the days the user asks for) are nowhere in
the learner, so whatever it gets right it learned from the data.
"""
import json
import random
import re
from pathlib import Path

import pytest

from evosyn.agents.learners.dialogue import split_message, track
from evosyn.agents.learners.embedded import EmbeddedLearner
from evosyn.envs.gold import confirmation_request
from evosyn.storage.records import Message, ToolCall, Trajectory
from tests.agents.toy_play import play as toy_play

LEARNERS = Path(__file__).resolve().parents[2] / "agents" / "learners"
# words of the project's domains (and their tools and fields) that the learner's code must not contain
DOMAIN_WORDS = re.compile(r"\b(airlines?|flights?|reservations?|baggages?|bags?|passengers?|cabins?|certificates?|"
                          r"retail|telecom|orders?|order_id|product_id|item_id|roaming|sim|hat\d+|user_id|"
                          r"membership|insurance)\b", re.IGNORECASE)


def _fn(name: str, props: dict) -> dict:
    return {"type": "function", "function": {"name": name, "description": name, "parameters": {
        "type": "object", "properties": props, "required": list(props)}}}


TOOLS = [_fn("get_member", {"member_no": {"type": "string"}}),
         _fn("get_locker", {"code": {"type": "string"}}),
         _fn("rent_locker", {"member_no": {"type": "string"}, "code": {"type": "string"},
                             "days": {"type": "integer"}, "amount": {"type": "integer"}})]


class Desk:
    """The toy environment: lockers with a daily rate, members, rentals that return a receipt."""

    def __init__(self, rng: random.Random):
        self.code = f"L{rng.randrange(1000, 9999)}"
        self.other = f"L{rng.randrange(1000, 9999)}"
        self.rate = rng.randrange(3, 15)
        self.days = rng.randrange(2, 9)
        self.member = f"m-{rng.randrange(10000, 99999)}"
        self.receipt = f"R{rng.randrange(100000, 999999)}"
        self.rented: dict | None = None

    def opening(self) -> str:
        return f"I would like to rent locker {self.code} for {self.days} days. My member number is {self.member}."

    def step(self, name: str, args: dict) -> str:
        if name == "get_member":
            return json.dumps({"member_no": args.get("member_no"), "since": "2021-04-02",
                               "lockers": [{"code": self.other, "size": "small", "daily_rate": self.rate + 2}]})
        if name == "get_locker":
            return json.dumps({"code": args.get("code"), "size": "large", "daily_rate": self.rate,
                               "floor": 2, "status": "free"})
        if name == "rent_locker":
            self.rented = dict(args)
            return json.dumps({"receipt": self.receipt, "amount": args.get("amount")})
        return "Error: unknown tool"

    def gold(self) -> dict:
        return {"member_no": self.member, "code": self.code, "days": self.days, "amount": self.rate * self.days}


def teacher(desk: Desk, n: int) -> Trajectory:
    msgs = [Message(role="user", content=desk.opening())]

    def call(name: str, args: dict) -> None:
        k = sum(1 for m in msgs if m.tool_calls)
        msgs.append(Message(role="assistant", tool_calls=[ToolCall(id=f"c{k}", name=name, arguments=args)]))
        msgs.append(Message(role="tool", content=desk.step(name, args), tool_call_id=f"c{k}"))

    call("get_member", {"member_no": desk.member})
    call("get_locker", {"code": desk.code})
    msgs.append(Message(role="assistant", content=confirmation_request("rent_locker", desk.gold())))
    msgs.append(Message(role="user", content="Yes, please go ahead."))
    call("rent_locker", desk.gold())
    msgs.append(Message(role="assistant", content="Is there anything else I can help you with?"))
    msgs.append(Message(role="user", content="No, that is everything."))
    msgs.append(Message(role="assistant", content=f"All set. Your receipt: {desk.receipt}."))
    msgs.append(Message(role="user", content="Thanks, bye."))
    return Trajectory(run_id="t", round=0, space_version=1, direction_id="d", blueprint_id="b",
                      trajectory_id=f"toy-{n}", task_id=f"toy-{n}", messages=msgs, producer="teacher")


def play(learner: EmbeddedLearner, desk: Desk, max_steps: int = 16) -> list[Message]:
    """The learner at the desk, against a user who confirms only the request they made."""
    return toy_play(learner, TOOLS, desk, desk.code, max_steps)


def _trained(n: int, seed: int = 0) -> EmbeddedLearner:
    rng = random.Random(seed)
    return EmbeddedLearner(seed=0).fit([teacher(Desk(rng), i) for i in range(n)], TOOLS)


@pytest.fixture(scope="module")
def learner():
    return _trained(60)


def test_a_made_up_domain_is_learned_from_its_trajectories_alone(learner):
    rng = random.Random(99)  # held-out desks: values never seen in training
    desks = [Desk(rng) for _ in range(20)]
    rented = [(d, play(learner, d)) for d in desks]
    exact = sum(d.rented == d.gold() for d, _ in rented)
    told = sum(any(m.role == "assistant" and d.receipt in (m.content or "") for m in msgs) for d, msgs in rented)
    assert exact >= 18, exact  # the amount is rate x days: found among the composites, not coded
    assert told >= 18, told  # the receipt, read from the rental's observation, is told at the close
    assert learner.writes == {"rent_locker"}  # the tool it asked to confirm, read from the data


def test_untrained_it_only_hangs_up():
    desk = Desk(random.Random(5))
    msgs = play(EmbeddedLearner().fit([], TOOLS), desk)
    assert desk.rented is None and not any(m.tool_calls for m in msgs)


def test_save_and_load_round_trip(learner, tmp_path):
    path = learner.save(tmp_path / "toy.joblib")
    loaded = EmbeddedLearner.load(path)
    assert json.loads(path.with_suffix(".json").read_text())["fingerprint"] == learner.fingerprint
    assert (loaded.writes, loaded.constants, loaded.texts) == (learner.writes, learner.constants, learner.texts)
    for seed in range(5):
        a, b = Desk(random.Random(seed + 50)), Desk(random.Random(seed + 50))
        assert [m.model_dump() for m in play(learner, a)] == [m.model_dump() for m in play(loaded, b)]


def test_identity_sentences_are_not_requests_and_the_pointer_follows_the_calls():
    clauses, identity = split_message("I would like to rent locker L1234 for 3 days; then cancel locker L9876. "
                                      "My member number is m-55555.", 0)
    assert [c.keys for c in clauses] == [{"L1234"}, {"L9876"}]
    assert [m.value for m in identity] == ["m-55555"]
    clauses, identity = split_message("Sure, my name is Ada Lovelace and my zip code is 12345.", 3)
    assert not clauses and [m.value for m in identity] == ["Ada Lovelace", 12345]
    history = [Message(role="user", content="first check locker L1234; then rent locker L9876. It is fine."),
               Message(role="assistant", tool_calls=[ToolCall(id="a", name="look", arguments={"code": "L9876"})])]
    assert track(history, writes=set()).pointer == 1
    history.append(Message(role="assistant", tool_calls=[ToolCall(id="b", name="rent", arguments={"code": "L9876"})]))
    assert track(history, writes={"rent"}).pointer == 2  # a write completes its request


def test_the_learner_code_names_no_domain():
    hits = [f"{p.name}:{n}: {line.strip()}" for p in sorted(LEARNERS.glob("*.py"))
            for n, line in enumerate(p.read_text().splitlines(), 1) if DOMAIN_WORDS.search(line)]
    assert not hits, hits


def _device_trajectory(n: int, rng: random.Random) -> tuple[Trajectory, str]:
    """Dual control: the agent asks the user to run one of two device tools, by the problem the user names."""
    problem, tool = rng.choice([("no signal", "restart_modem"), ("slow data", "reset_network")])
    ask = f'Please do this on your device: {tool} with {json.dumps({"wait": 3})}.'
    call = ToolCall(id=f"d{n}", name=tool, arguments={"wait": 3}, requestor="user")
    msgs = [Message(role="user", content=f"My phone has {problem} since LN{rng.randrange(1000, 9999)} broke."),
            Message(role="assistant", content=ask),
            Message(role="user", tool_calls=[call], requestor="user"),
            Message(role="tool", content="done", tool_call_id=call.id, requestor="user"),
            Message(role="assistant", content="Is there anything else I can help you with?"),
            Message(role="user", content="No, that is everything."),
            Message(role="assistant", content="Glad it works now.")]
    return Trajectory(run_id="t", round=0, space_version=1, direction_id="d", blueprint_id="b",
                      trajectory_id=f"dev-{n}", task_id=f"dev-{n}", messages=msgs, producer="teacher"), tool


def test_a_request_for_a_device_action_names_the_tool_the_data_calls_for():
    rng = random.Random(3)
    learner = EmbeddedLearner().fit([_device_trajectory(n, rng)[0] for n in range(40)], TOOLS)
    for n in range(10):
        traj, tool = _device_trajectory(100 + n, rng)
        reply = learner.act(traj.messages[:1])
        assert reply.content == traj.messages[1].content, (reply.content, tool)
