"""Stage events: they add up to what a pass wrote, fed stages finish once their feeder has, lines read well."""
from __future__ import annotations

import threading

import pytest
from pydantic import ValidationError

from evosyn.agents.designer import ColdStart
from evosyn.envs.ontology import load_initial_space
from evosyn.envs.packs import get_pack
from evosyn.tasks.progress import StageEvent, Tally, describe
from evosyn.tasks.stages import Ctx
from evosyn.tasks.synthesis import run_pass, summary
from evosyn.storage.store import Store
from evosyn.envs.packs import get_domain

RUN = "progress-test"


def ev(stage, done, kept, rejected=None, total=None, round=1, run=RUN):
    return StageEvent(run_id=run, round=round, stage=stage, done=done, kept=kept, rejected=rejected or {},
                      total=total)


def test_a_line_says_kept_of_total_and_the_reasons():
    assert describe("verify", 50, 47, {"state": 1, "policy": 2}, 50) == "verify: 47/50 kept; rejected: policy 2, state 1"
    assert describe("generate", 50, 47, {"infeasible": 3}, 50) == "generate: 47/50 built; rejected: infeasible 3"
    assert describe("evaluate test", 171, 89, {"state": 82}, 171, "0.52 on 171 tasks") == \
        "evaluate test: 0.52 on 171 tasks; failed: state 82"
    many = {f"c{i}": 1 for i in range(6)}
    assert describe("verify", 6, 0, many, 6).endswith("c0 1, c1 1, c2 1, c3 1, other 2")


def test_an_event_must_add_up():
    with pytest.raises(ValidationError, match="kept 3 \\+ rejected 1 != done 5"):
        ev("verify", 5, 3, {"policy": 1})


def test_fed_stages_finish_after_their_feeder_once_each():
    t = Tally()
    assert [s.stage for s in t.add(ev("plan", 10, 9, {"infeasible": 1}, total=10))] == ["plan"]
    assert t.add(ev("generate", 5, 5)) == []
    assert t.add(ev("rollout", 5, 5)) == []  # generate is not finished: rollout's total may still grow
    assert t.add(ev("verify", 5, 4, {"policy": 1})) == []
    # the last chunk: generate finishes; its 4 tasks still have to be rolled out
    assert [s.stage for s in t.add(ev("generate", 4, 4))] == ["generate"]
    assert [s.stage for s in t.add(ev("rollout", 4, 3, {"teacher error": 1}))] == ["rollout"]
    done = t.add(ev("verify", 3, 3))
    assert [s.stage for s in done] == ["verify"]
    assert done[0].line() == "verify: 7/8 kept; rejected: policy 1"
    assert done[0].total == 8 and done[0].finished


def test_a_chunk_rejected_whole_upstream_finishes_every_stage_after_it():
    t = Tally()
    t.add(ev("plan", 4, 4, total=4))
    t.add(ev("rollout", 0, 0))
    t.add(ev("verify", 0, 0))
    finished = t.add(ev("generate", 4, 0, {"infeasible": 4}))
    assert [(s.stage, s.total) for s in finished] == [("generate", 4), ("rollout", 0), ("verify", 0)]
    assert [s.stage for s in t.add(ev("plan", 1, 1, total=1, round=2))] == ["plan"]  # rounds are apart


def test_a_tally_fed_from_threads_loses_nothing():
    t = Tally()
    t.add(ev("plan", 800, 800, total=800))
    finished: list = []
    lock = threading.Lock()

    def feed():
        for _ in range(100):
            out = t.add(ev("generate", 1, 1))
            with lock:
                finished.extend(out)

    threads = [threading.Thread(target=feed) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert [s.stage for s in finished] == ["generate"]
    assert finished[0].done == finished[0].kept == 800


def _pass(store, emit, budget=14, chunk_size=5):
    space = load_initial_space(get_pack("airline"), run_id=RUN)
    return run_pass(Ctx(store, RUN, 0, 3, get_domain("airline")), space, ColdStart(), budget, chunk_size=chunk_size, emit=emit)


def test_a_pass_emits_what_it_wrote_and_a_resumed_pass_the_same(tmp_path):
    events: list[StageEvent] = []
    result = _pass(Store(tmp_path), events.append)
    t = Tally()
    finished = [s for e in events for s in t.add(e)]
    assert [s.stage for s in finished] == ["design", "plan", "generate", "rollout", "verify"]
    st = {s.stage: s for s in finished}
    assert st["plan"].kept == len(result.blueprints) == st["generate"].total
    assert st["generate"].kept == len(result.tasks) == st["rollout"].total
    assert st["verify"].kept == len(result.kept)
    assert sum(st["verify"].rejected.values()) == st["verify"].total - len(result.kept)
    _, reasons = summary(result)
    assert sum(st[s].rejected.total() for s in ("generate", "rollout", "verify")) == \
        len(result.blueprints) - len(result.kept) == sum(reasons.values())
    assert len([e for e in events if e.stage == "verify"]) == 3  # one per chunk of 5

    again: list[StageEvent] = []
    _pass(Store(tmp_path), again.append)  # every stage read back from the store
    strip = lambda es: [e.model_dump(exclude={"seconds"}) for e in es]
    assert strip(again) == strip(events)
