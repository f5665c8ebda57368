"""tau2's ``Task`` behind ``EnvTask``: what the core reads equals tau2's own fields; a draft is a valid tau2 task."""
import pytest

from evosyn.envs.base import GoldAction, TaskDraft, UserScenario
from evosyn.envs.tau2.task import Tau2Task, draft_json


def test_official_tasks_read_through_the_interface_as_tau2_states_them(airline, telecom):
    for dom in (airline, telecom):
        for task in dom.tasks("base")[:40]:
            t2, crit = task.tau2, task.tau2.evaluation_criteria
            assert task.initial_state is t2.initial_state
            assert [(a.name, a.arguments, a.requestor) for a in task.gold_actions] == \
                [(a.name, a.arguments, a.requestor) for a in (crit.actions or [])]
            assert task.communicate_info == list(crit.communicate_info or [])
            assert task.reward_basis == {b.value for b in crit.reward_basis}
            assert task.scenario.reason_for_call == t2.user_scenario.instructions.reason_for_call
            again = dom.task_from_json(task.to_json())  # what the store keeps reads back as the same task
            assert again.key() == task.key() and again.to_json() == task.to_json()


def test_a_draft_is_a_valid_tau2_task_whose_stored_json_is_the_draft(airline):
    draft = TaskDraft(id="syn-1", scenario=UserScenario(domain="airline", reason_for_call="You want to fly.",
                                                         known_info="Your user id is u1.", task_instructions="Be nice."),
                      actions=[GoldAction("get_user_details", {"user_id": "u1"}, action_id="syn-1-0")],
                      communicate_info=["done"], purpose="test", ticket="t")
    task = airline.make_task(draft)
    assert isinstance(task, Tau2Task) and task.to_json() == draft_json(draft)
    assert task.to_json()["evaluation_criteria"]["reward_basis"] == ["DB", "COMMUNICATE"]
    assert [a.name for a in task.gold_actions] == ["get_user_details"] and task.communicate_info == ["done"]
    assert "persona" not in task.to_json()["user_scenario"]  # none given: none written
    with pytest.raises(ValueError, match="not a valid tau2 task"):
        airline.task_from_json({"id": "x", "user_scenario": {"instructions": 3}})
