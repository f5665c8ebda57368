"""The one episode loop (``harness.converse``): how an episode ends, as tau2's orchestrator ends one."""
from __future__ import annotations

import pytest

from evosyn.agents.ask import RoleRejected
from evosyn.agents.learners.harness import converse
from evosyn.agents.roles import StageUnavailable
from evosyn.envs.packs import get_domain
from evosyn.storage.records import Message, ToolCall


class Agent:
    """Looks a user up once, then asks whether there is anything else, turn after turn."""

    def __init__(self):
        self.turns = 0

    def reset(self, tools, policy):
        self.tools, self.policy = tools, policy

    def act(self, messages):
        self.turns += 1
        if self.turns == 1:
            return Message(role="assistant", tool_calls=[ToolCall(id="c1", name="get_user_details",
                                                                  arguments={"user_id": "mia_li_3668"})])
        return Message(role="assistant", content="Is there anything else?")


class User:
    """Says ``lines`` in turn; ``stop_after``: the line after which it ends the call; ``fail_at``: the turn
    whose reply it cannot give (raises ``RoleRejected`` with that text)."""

    def __init__(self, lines, stop_after=None, fail_at=None, failure="user: no usable reply after 3 attempts"):
        self.lines, self.stop_after, self.fail_at, self.failure = lines, stop_after, fail_at, failure
        self.said, self.done = 0, False

    def _say(self):
        if self.said == self.fail_at:
            raise RoleRejected(self.failure)
        text = self.lines[min(self.said, len(self.lines) - 1)]
        self.done = self.said == self.stop_after
        self.said += 1
        return Message(role="user", content=text, requestor="user")

    def opening(self):
        return self._say()

    def respond(self, text):
        return self._say()


@pytest.fixture(scope="module")
def airline():
    return get_domain("airline")


def test_a_user_who_stops_ends_the_episode_as_user_stop_even_at_its_opening(airline):
    agent = Agent()
    msgs, why = converse(agent, airline, None, User(["Never mind. ###STOP###"], stop_after=0))
    assert why == "user_stop" and agent.turns == 0 and [m.role for m in msgs] == ["user"]
    msgs, why = converse(Agent(), airline, None, User(["Hi.", "No.", "Bye."], stop_after=2))
    # opening, the agent's call and its result, then two asks and two answers: the second answer stops it
    assert why == "user_stop" and [m.role for m in msgs] == ["user", "assistant", "tool", "assistant", "user",
                                                             "assistant", "user"]
    assert msgs[2].tool_call_id == "c1" and "mia_li_3668" in (msgs[2].content or "")


def test_a_user_with_no_usable_reply_ends_the_episode_as_user_error(airline):
    msgs, why = converse(Agent(), airline, None, User(["Hi.", "No."], fail_at=2))
    assert why == "user_error"
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    msgs, why = converse(Agent(), airline, None, User(["Hi."], fail_at=0))
    assert why == "user_error" and msgs == []


def test_an_unreachable_user_llm_stops_the_run_not_the_episode(airline):
    with pytest.raises(StageUnavailable):
        converse(Agent(), airline, None, User(["Hi."], fail_at=1, failure="user: LLM unavailable: connection refused"))


def test_max_steps_counts_agent_turns(airline):
    agent = Agent()
    msgs, why = converse(agent, airline, None, User(["Hi.", "No."]), max_steps=3)
    assert why == "max_steps" and agent.turns == 3 and msgs[-1].role == "user"


def test_the_agent_is_given_the_tasks_tools_and_policy_and_a_tau2_agent_the_domains(airline):
    car = get_domain("car_bench")
    task = car.official_task("hallucination_f0")  # a removed tool, and the car's own place and clock
    agent = Agent()
    converse(agent, car, task, User(["Hi. ###STOP###"], stop_after=1), max_steps=1)
    names = {t["function"]["name"] for t in agent.tools}
    assert names == {s.name for s in car.tools_for(task)} and names < {s.name for s in car.tools("assistant")}
    assert agent.policy == car.task_policy(task) != car.policy
    converse(agent, airline, None, User(["Hi.", "Bye."], stop_after=1), max_steps=1)
    assert agent.policy == airline.policy and len(agent.tools) == len(airline.tools("assistant"))
    assert not airline.task_context and car.task_context
