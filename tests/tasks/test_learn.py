"""tasks/learn.py: the evaluate stage's progress events."""
from evosyn.tasks.learn import evaluated


def test_an_empty_evaluation_is_an_event_not_a_division_by_zero():
    # a round where nothing verified evaluates an empty diagnostic set (seen with a real 135M model)
    event = evaluated("run", 1, "diagnostic", [], total=0, before=0)
    assert event.detail == "no tasks" and event.done == 0 and event.kept == 0
