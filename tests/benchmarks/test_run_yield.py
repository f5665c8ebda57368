"""`bench run`'s verified yield per round: blueprints with a passed verdict (any attempt, counted once) over the
run's budget; rejections and test-set rows do not count."""
from __future__ import annotations

from evosyn.benchmarks.run import verified_yield
from evosyn.storage.records import Run, Verdict
from evosyn.storage.store import Store


def _verdict(rnd: int, bp: str, passed: bool, attempt: int = 0) -> Verdict:
    return Verdict(run_id="r", round=rnd, blueprint_id=bp, verdict_id=f"v-{rnd}-{bp}-{attempt}", task_id=f"t-{bp}",
                   trajectory_id=f"j-{bp}-{attempt}", reward=float(passed), passed=passed, attempt=attempt,
                   checks=[])


def test_verified_yield_per_round(tmp_path):
    store = Store(tmp_path / "s")
    store.write([Run(run_id="r", round=0, domain="airline", rounds=2, budget=4)], "run")
    store.write([_verdict(1, "a", True), _verdict(1, "b", False), _verdict(1, "b", True, 1), _verdict(1, "c", False)],
                "v1")
    store.write([_verdict(2, "d", True), _verdict(2, "e", True), _verdict(2, "f", True), _verdict(2, "g", True)], "v2")
    assert verified_yield(tmp_path / "s") == [
        {"run_id": "r", "round": 1, "verified": 2, "budget": 4, "yield": 0.5},
        {"run_id": "r", "round": 2, "verified": 4, "budget": 4, "yield": 1.0}]
