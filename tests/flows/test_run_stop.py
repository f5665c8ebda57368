"""The run's early stop rule (flows/run.py `stops`): on by default for reflecting arms, off at 0."""
from evosyn.flows.run import stops
from evosyn.config import RunConfig


def test_a_reflecting_arm_stops_after_two_unchanged_rounds_by_default():
    cfg = RunConfig(arm="no_feedback")
    assert [stops(cfg, n) for n in (0, 1, 2, 3)] == [False, False, True, True]
    assert stops(RunConfig(arm="evosyn"), 2) and stops(RunConfig(arm="no_designer"), 2)


def test_zero_never_stops_and_arms_that_cannot_revise_never_stop():
    for arm in ("evosyn", "no_feedback", "no_designer"):
        assert not any(stops(RunConfig(arm=arm, stop_after_static_rounds=0), n) for n in range(10))
    for arm in ("static", "no_reflector", "single_agent"):
        assert not stops(RunConfig(arm=arm), 5)
    assert stops(RunConfig(arm="evosyn", stop_after_static_rounds=1), 1)
