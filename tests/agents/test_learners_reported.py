"""Multi-step repairs under dual control: the learner asks for each reported problem's check and fix, then the test.

A made-up gadget desk (nowhere in the learner): the user reports one to three problems in one message; each is
repaired by the user on their own gadget as the agent asks (a check that shows the fault, then its fix), and
the agent ends with a test. Every request for a user call is the same move, so which problems are left must
come from the user's calls and the reported parts the data links them to (``agents/learners/reported.py``).
"""
import random
import re

import pytest

from evosyn.agents.learners.embedded import EmbeddedLearner
from evosyn.agents.learners.reported import Links, learn_links, open_tokens
from evosyn.storage.records import Message, ToolCall, Trajectory

PROBLEMS = {  # what the user reports -> (the check, what it shows, the fix)
    "the screen stays dark": ("check_screen", "Screen brightness is zero.", "raise_brightness"),
    "the speaker makes no sound": ("check_volume", "Volume is muted.", "unmute_volume"),
    "the battery drains overnight": ("check_apps", "A tracker app runs in the background.", "stop_tracker"),
    "the clock shows a wrong hour": ("check_zone", "The time zone is unset.", "set_zone"),
}
TOOLS = [{"type": "function", "function": {"name": "get_gadget", "description": "get_gadget", "parameters": {
    "type": "object", "properties": {"gadget_no": {"type": "string"}}, "required": ["gadget_no"]}}}]
ASK = "Please do this on your gadget: run {}."


class Gadget:
    def __init__(self, rng: random.Random, k: int):
        self.no = f"G{rng.randrange(1000, 9999)}"
        self.reported = rng.sample(sorted(PROBLEMS), k)
        self.broken = set(self.reported)
        self.calls: list[str] = []

    def opening(self) -> str:
        return f"I would like to fix my gadget: {'; '.join(self.reported)}. My gadget number is {self.no}."

    def user_call(self, name: str) -> str:
        self.calls.append(name)
        for problem, (check, shows, fix) in PROBLEMS.items():
            if name == check:
                return shows if problem in self.broken else "All fine."
            if name == fix:
                self.broken.discard(problem)
                return "Done."
        if name == "run_test":
            return "Test passed." if not self.broken else "Test failed."
        return "Error: unknown action"

    def repaired(self) -> bool:
        return not self.broken and self.calls[-1:] == ["run_test"]


def _episode(gadget: Gadget, agent) -> list[Message]:
    """The conversation with ``agent(messages) -> Message``: the user makes each call the agent asks for."""
    msgs = [Message(role="user", content=gadget.opening())]
    for n in range(24):
        reply = agent(msgs)
        msgs.append(reply)
        if reply.tool_calls:
            c = reply.tool_calls[0]
            msgs.append(Message(role="tool", content='{"gadget_no": "%s", "model": "X2"}' % gadget.no,
                                tool_call_id=c.id))
            continue
        asked = re.search(r"run (\w+)", reply.content or "")
        if asked:
            call = ToolCall(id=f"u{n}", name=asked.group(1), arguments={}, requestor="user")
            msgs.append(Message(role="user", tool_calls=[call], requestor="user"))
            msgs.append(Message(role="tool", content=gadget.user_call(call.name), tool_call_id=call.id,
                                requestor="user"))
        elif "anything else" in (reply.content or ""):
            msgs.append(Message(role="user", content="No, that is everything."))
        else:
            break
    return msgs


def _teacher(gadget: Gadget, n: int) -> Trajectory:
    steps = [("tool", "get_gadget")] + [("ask", x) for p in gadget.reported for x in (PROBLEMS[p][0], PROBLEMS[p][2])]
    steps += [("ask", "run_test"), ("say", "Is there anything else I can help you with?"), ("say", "All fixed.")]
    it = iter(steps)

    def agent(msgs):
        kind, what = next(it)
        if kind == "tool":
            return Message(role="assistant", tool_calls=[ToolCall(id="a0", name=what, arguments={"gadget_no": gadget.no})])
        return Message(role="assistant", content=ASK.format(what) if kind == "ask" else what)

    return Trajectory(run_id="t", round=0, space_version=1, direction_id="d", blueprint_id="b",
                      trajectory_id=f"fix-{n}", task_id=f"fix-{n}", messages=_episode(gadget, agent),
                      producer="teacher")


@pytest.fixture(scope="module")
def data():
    rng = random.Random(0)
    return [_teacher(Gadget(rng, rng.choice([1, 1, 1, 2])), n) for n in range(80)]


def test_each_reported_part_is_linked_to_its_own_calls(data):
    links = learn_links(data)
    for problem, (check, _, fix) in PROBLEMS.items():
        words = tuple(w for w in re.findall(r"[a-z]+", problem) if len(w) >= 4)
        assert {check, fix} <= set(links.calls[links.key(words)]), problem
    assert learn_links([t.model_copy(update={"messages": t.messages[:1]}) for t in data]).calls == {}


def test_the_state_names_the_first_problem_still_open_and_none_once_all_are_addressed(data):
    links = learn_links(data)
    two = next(t for t in data if t.messages[0].content.count(";") == 1)
    first, second = (p.strip() for p in two.messages[0].content.split(":", 1)[1].split(".")[0].split(";"))
    start = open_tokens(two.messages[:1], links)
    assert "open_2" in start and all(f"open_w_{w}" in start for w in first.split() if len(w) >= 4)
    after = next(i for i, m in enumerate(two.messages) if m.role == "user" and m.tool_calls
                 and m.tool_calls[0].name == PROBLEMS[first][0])
    mid = open_tokens(two.messages[:after + 2], links)
    assert "open_1" in mid and all(f"open_w_{w}" in mid for w in second.split() if len(w) >= 4)
    assert "open_none" in open_tokens(two.messages, links)
    assert not any(t.startswith("open") for t in open_tokens(two.messages, Links()))  # no links: no parts tracked


def test_several_reported_problems_are_each_checked_and_fixed_before_the_test(data):
    learner = EmbeddedLearner(seed=0).fit(data, TOOLS)
    rng = random.Random(5)
    repaired = 0
    for _ in range(10):
        gadget = Gadget(rng, rng.choice([2, 3]))
        learner.reset(TOOLS, "")
        _episode(gadget, lambda msgs: learner.act(list(msgs)))
        repaired += gadget.repaired()
    assert repaired >= 7, repaired
