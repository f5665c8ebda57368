"""The task interface every family meets (envs/base.py): tau2's action rule and reward basis, the scenario's parts."""
from evosyn.envs.base import EnvTask, GoldAction, UserScenario


def test_a_gold_action_matches_on_its_compared_arguments():
    action = GoldAction("book", {"user_id": "u1", "cabin": "economy"}, compare_args=("user_id",))
    assert action.matches("book", {"user_id": "u1", "cabin": "business"})
    assert not action.matches("book", {"user_id": "u2", "cabin": "economy"})
    assert not action.matches("cancel", {"user_id": "u1"})
    assert GoldAction("book", {"user_id": "u1"}, compare_args=()).matches("book", {"anything": 1})
    every = GoldAction("book", {"user_id": "u1"})  # no compare_args: every argument the call passes
    assert every.matches("book", {"user_id": "u1"}) and not every.matches("book", {"user_id": "u1", "x": 1})


def test_the_scenario_gives_its_non_empty_parts_in_order():
    s = UserScenario(reason_for_call="Fly.", task_instructions="Be brief.", persona="A pilot.", domain="d")
    assert list(s.parts().items()) == [("persona", "A pilot."), ("reason_for_call", "Fly."),
                                       ("task_instructions", "Be brief.")]


class _Task(EnvTask):
    id = "t"
    initial_state, scenario, gold_actions, communicate_info = None, UserScenario(), [], []
    reward_basis, evaluated, state_checked = frozenset({"DB", "COMMUNICATE"}), True, True

    def failed_assertions(self, episode):
        return []

    def to_json(self):
        return {"id": self.id}


def test_the_default_reward_needs_every_component_of_the_basis():
    task = _Task()
    passed = {"DB": True, "ENV_ASSERTION": False, "ACTION": False, "COMMUNICATE": True}
    assert task.reward(passed) == 1.0  # the failed components are not in the basis
    assert task.reward({**passed, "COMMUNICATE": False}) == 0.0
    assert task.key() == _Task().key() and len(task.key()) == 64
