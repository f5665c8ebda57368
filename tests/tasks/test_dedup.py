"""tasks/dedup.py: a pass seeded with planted copies (near copies of its own tasks, official test tasks replayed as
synthesized ones, a copy of a test-set task): every planted one flagged as what it is, no clean task flagged; the
rows are queryable in SQL, read back (not redone) on a rerun, and dropped from training only when asked."""
from __future__ import annotations

import copy
import json

import pytest

from evosyn.agents.designer import ColdStart
from evosyn.envs.ontology import load_initial_space
from evosyn.envs.packs import get_domain, get_pack
from evosyn.storage.catalog import query_rows
from evosyn.config import DedupConfig
from evosyn.storage.digest import normalized_rows
from evosyn.storage.records import Run, SFTExample, SynthTask
from evosyn.storage.store import Store
from evosyn.tasks import dedup, testset
from evosyn.tasks.stages import Ctx
from evosyn.tasks.synthesis import run_pass

RUN, N_TEST = "dedup-r", 8


def _plant(original: SynthTask, tau2: dict, tag: str, split: str = "train") -> tuple[SynthTask, SFTExample]:
    tid = f"planted-{tag}"
    t = original.model_copy(update={"task_id": tid, "round": 2, "tau2_task": tau2,
                                    "blueprint_id": f"bp-{tag}"})
    ex = SFTExample(run_id=RUN, round=2, example_id=f"ex-{tag}", task_id=tid, trajectory_id=f"tr-{tag}", split=split,
                    messages=[])
    return t, ex


def _writes(domain, tau2: dict) -> bool:
    return any(domain.tool(a["name"], a.get("requestor") or "assistant").kind == "write"
               for a in tau2["evaluation_criteria"]["actions"])


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """Round 1: a real pass. Round 2: a second real pass (clean) plus the planted copies. Returns (store, planted
    task id -> (flag, the task it copies))."""
    store = Store(tmp_path_factory.mktemp("dedup") / "s")
    domain = get_domain("airline")
    testset.test_cases(store, get_domain("airline"), n=N_TEST)  # the official-matched set the pass is checked against
    for rnd, budget in ((1, 40), (2, 30)):
        ctx = Ctx(store, RUN, rnd, seed=rnd, env=get_domain("airline"))
        run_pass(ctx, load_initial_space(get_pack("airline"), run_id=RUN), ColdStart(), budget)
    r1 = [t for (t, _) in dedup.verified(store, RUN, 1)[1]]
    planted, tasks, examples = {}, [], []

    def plant(original, tau2, tag, flag, copies):
        t, e = _plant(original, tau2, tag)
        tasks.append(t), examples.append(e)
        planted[t.task_id] = (flag, copies)

    for i, orig in enumerate(r1[:3]):  # near copies: one more sentence in the instruction
        tau2 = copy.deepcopy(orig.tau2_task)
        tau2["user_scenario"]["instructions"]["task_instructions"] += " Please be quick, I am at the airport."
        plant(orig, tau2, f"near{i}", "duplicate", orig.task_id)
    writer = next(t for t in r1 if _writes(domain, t.tau2_task))
    tau2 = copy.deepcopy(writer.tau2_task)  # the same state change, asked in other words
    tau2["user_scenario"]["instructions"]["reason_for_call"] = "Hi, I need this sorted for me right now, thanks."
    plant(writer, tau2, "reworded", "duplicate", writer.task_id)
    for split, flag in (("test", "official_test"), ("train", "official")):
        for official in domain.tasks(split)[:2]:  # official tasks replayed as synthesized ones
            plant(r1[0], official.to_json(), f"{split}-{official.id}", flag, official.id)
    held = testset.test_cases(store, get_domain("airline"), n=N_TEST)[0].task
    plant(r1[0], copy.deepcopy(held.tau2_task), "testset", "test_set", held.task_id)
    store.write(tasks, "planted")
    store.write(examples, "planted")
    return store, planted


def _all_rows(store):
    return [r for rnd in (1, 2) for r in store.read_chunk("dedup", RUN, rnd, "dedup")]


def test_every_planted_copy_is_flagged_as_what_it_is_and_no_clean_task_is(seeded):
    store, planted = seeded
    counts = [dedup.dedup(Ctx(store, RUN, rnd, seed=0, env=get_domain("airline")), N_TEST) for rnd in (1, 2)]
    rows = _all_rows(store)
    clean = [r for r in rows if r.task_id not in planted]
    assert len(clean) >= 40 and not any(r.flagged for r in clean)
    flagged = {r.task_id: r for r in rows if r.flagged}
    assert set(flagged) == set(planted)
    for tid, (flag, copies) in planted.items():
        r = flagged[tid]
        assert flag in r.flags, (tid, r.flags)
        assert copies == {"duplicate": r.duplicate_of, "official_test": r.official_task, "official": r.official_task,
                          "test_set": r.test_set_task}[flag]
    assert flagged["planted-reworded"].duplicate_by == ["actions"]  # found by its gold actions alone
    assert all(flagged[f"planted-near{i}"].duplicate_by == ["instruction", "actions"] for i in range(3))
    replayed = [r for r in flagged.values() if "official_test" in r.flags]
    assert len(replayed) == 2 and all("test" in r.official_splits and r.official_jaccard == 1.0 for r in replayed)
    # the round's counts, as the log line, MLflow and the report have them
    assert counts[0][0].flagged == 0 and counts[1][0].flagged == len(planted)
    assert counts[1][0].official_test == 2 and counts[1][0].official == 2 and counts[1][0].test_set == 1
    assert counts[1][0].line().startswith(f"{counts[1][0].checked} checked, {len(planted)} flagged (duplicate 4")
    # the test set's own tasks were checked too, in its partition
    set_id = testset.test_set_run_id(get_domain("airline"), n=N_TEST)
    assert counts[1][1].checked == len(store.read_chunk("dedup", set_id, 0, "dedup")) == N_TEST


def test_the_rows_are_queryable_in_sql(seeded):
    store, planted = seeded
    for rnd in (1, 2):
        dedup.dedup(Ctx(store, RUN, rnd, seed=0, env=get_domain("airline")), N_TEST)
    got = query_rows(f"select task_id, list_sort(flags) from dedup where run_id = '{RUN}' and flagged order by 1",
                     store)
    assert [r[0] for r in got.rows] == sorted(planted)
    by_flag = dict(query_rows(f"select f, count(*) from (select unnest(flags) f from dedup where run_id = '{RUN}') "
                              "group by f", store).rows)
    assert by_flag["official_test"] == 2 and by_flag["test_set"] == 1


def test_a_rerun_reads_its_rows_back_and_a_redone_check_writes_the_same_rows(seeded, monkeypatch):
    store, _ = seeded
    for rnd in (1, 2):
        dedup.dedup(Ctx(store, RUN, rnd, seed=0, env=get_domain("airline")), N_TEST)
    before = normalized_rows(store, "dedup", RUN)
    monkeypatch.setattr(dedup, "check", lambda *a, **k: pytest.fail("a finished check was redone"))
    dedup.dedup(Ctx(store, RUN, 2, seed=0, env=get_domain("airline")), N_TEST)
    monkeypatch.undo()
    # killed after its rows, before its marker: redone, the same rows
    store.marker_path(dedup.STAGE, RUN, 2, dedup.CHUNK).unlink()
    dedup.dedup(Ctx(store, RUN, 2, seed=0, env=get_domain("airline")), N_TEST)
    assert normalized_rows(store, "dedup", RUN) == before
    # other parameters: the chunk is redone with them, then the run's own again gives the first rows
    strict = DedupConfig(threshold=0.99)
    dedup.dedup(Ctx(store, RUN, 2, seed=0, dedup=strict, env=get_domain("airline")), N_TEST)
    strict_rows = {r.task_id: r for r in store.read_chunk("dedup", RUN, 2, "dedup")}
    assert all(strict_rows[f"planted-near{i}"].duplicate_by in ([], ["actions"]) for i in range(3))  # J < 0.99
    assert strict_rows["planted-testset"].test_set_by == ["instruction", "actions"]  # J = 1
    dedup.dedup(Ctx(store, RUN, 2, seed=0, env=get_domain("airline")), N_TEST)
    assert normalized_rows(store, "dedup", RUN) == before


def test_flagged_tasks_leave_training_only_when_the_run_drops_them(seeded):
    store, planted = seeded
    for rnd in (1, 2):
        dedup.dedup(Ctx(store, RUN, rnd, seed=0, env=get_domain("airline")), N_TEST)
    everything = [e.task_id for e in dedup.training_examples(store, RUN, 2)]  # a pass without a run row: kept
    assert set(planted) <= set(everything)
    for drop in (False, True):
        cfg = {"domain": "airline", "dedup": {"drop": drop}}
        store.write([Run(run_id=RUN, round=0, domain="airline", rounds=2, budget=40,
                         config_json=json.dumps(cfg))], "run")
        kept = [e.task_id for e in dedup.training_examples(store, RUN, 2)]
        assert kept == everything if not drop else kept == [t for t in everything if t not in planted]
    store.remove_chunk("runs", RUN, 0, "run")


def test_a_default_dedup_section_leaves_the_run_id_and_its_stored_config_as_they_were():
    from evosyn.flows.run import run_id_for
    from evosyn.config import RunConfig

    cfg = RunConfig(domain="airline")
    assert "dedup" not in cfg.stored_json()
    assert run_id_for(cfg) == run_id_for(cfg.model_copy(update={"dedup": DedupConfig(threshold=0.9)}))
    dropping = cfg.model_copy(update={"dedup": DedupConfig(drop=True)})
    assert run_id_for(dropping) != run_id_for(cfg) and '"drop":true' in dropping.stored_json()


def test_a_test_set_built_after_a_check_is_checked_against_on_the_next_one(tmp_path):
    store, domain = Store(tmp_path / "s"), get_domain("airline")
    ctx = Ctx(store, "late", 0, seed=4, env=get_domain("airline"))
    run_pass(ctx, load_initial_space(get_pack("airline"), run_id="late"), ColdStart(), 6)
    first = dedup.check_run(store, domain, "late", DedupConfig(), N_TEST)
    assert first.test_set_ids == [] and first.rounds[0].checked > 0
    marker = store.marker_path(dedup.STAGE, "late", 0, dedup.CHUNK)
    before = json.loads(marker.read_text())["params"]
    testset.test_cases(store, get_domain("airline"), n=N_TEST)
    second = dedup.check_run(store, domain, "late", DedupConfig(), N_TEST)
    assert second.test_set_ids == [testset.test_set_run_id(get_domain("airline"), n=N_TEST)]
    after = json.loads(marker.read_text())["params"]
    assert after != before and after.endswith(f"sets={second.test_set_ids[0]}")  # checked again, against the set
    assert second.test_sets.checked == N_TEST
