"""`evosyn bench discovery`: the planted gaps, bad input, and one tiny end-to-end run of both arms."""
import json

import pytest
from click.testing import CliRunner

from evosyn.benchmarks.discovery import GapError, check_factors, gaps_for
from evosyn.envs.packs import get_domain

SHARED_PREFECT_API = True  # its runs talk to one Prefect server (tests/prefect_server.py)


def test_default_gaps_are_three_controllable_properties_per_domain():
    for domain in ("airline", "retail", "telecom"):
        env = get_domain(domain)
        gaps = gaps_for(env)
        assert len(gaps) == 3 and len({p for p, _ in gaps}) == 3
        assert all(v in env.pack.controllable[p] for p, v in gaps)
    assert gaps_for(get_domain("airline"), ["num_write=3-4"]) == [("num_write", "3-4")]
    with pytest.raises(GapError, match="does not control 'turns'"):
        gaps_for(get_domain("airline"), ["turns=13+"])
    with pytest.raises(GapError, match="'7' is not a bucket of num_write"):
        gaps_for(get_domain("airline"), ["num_write=7"])


def test_a_domain_whose_generator_controls_only_counts_plants_their_top_buckets_beyond_the_space():
    car_bench, airline = get_domain("car_bench"), get_domain("airline")
    assert gaps_for(car_bench) == [("num_write", "5+"), ("num_read", "5+")]
    assert gaps_for(car_bench, space=("num_write", "num_read")) == []  # `--space paper`: nothing left
    assert gaps_for(airline, space=("num_write", "num_read")) == gaps_for(airline)  # tau2: as before


def test_added_factors_are_controllable_and_not_planted():
    retail = get_domain("retail")
    assert check_factors(retail, ["multi_item", "multi_item"], [("money_moves", "2+")]) == ("multi_item",)
    assert check_factors(retail, ["write_mix", "multi_item"], []) == ("multi_item", "write_mix")
    with pytest.raises(GapError, match="--factor turns: the retail generator does not control 'turns'"):
        check_factors(retail, ["turns"], [])
    with pytest.raises(GapError, match="--factor money_moves: it is a planted gap's property"):
        check_factors(retail, ["money_moves"], [("money_moves", "2+")])


def test_added_factors_reach_every_runs_config(tmp_path, monkeypatch):
    import evosyn.benchmarks.discovery as discovery

    plans = []
    monkeypatch.setattr(discovery, "launch", lambda plan, say: (plans.append(plan), ([], 0.0))[1])
    got = discovery.bench(get_domain("retail"), [0], tmp_path, gaps=[("money_moves", "2+")], keep=0.0, diagnose_size=0,
                          space="paper", factors=("multi_item",))
    assert [p.extra["initial_factors"] for p in plans] == [["num_write", "num_read", "multi_item"]]
    assert got["factors"] == ["multi_item"] and got["initial_factors"] == ["num_write", "num_read", "multi_item"]
    discovery.bench(get_domain("retail"), [0], tmp_path, gaps=[("money_moves", "2+")], keep=0.0, diagnose_size=0,
                    factors=("multi_item",))
    assert plans[-1].extra["initial_factors"] == ["multi_item"]


def test_the_runs_read_the_default_probe_set_unless_one_is_named(tmp_path, monkeypatch):
    """Without --probe-size the runs keep their own default (the budget, at most 300), recorded as that number."""
    from evosyn.benchmarks import discovery

    plans = []
    monkeypatch.setattr(discovery, "launch", lambda plan, say: (plans.append(plan), ([], 0.0))[1])
    got = discovery.bench(get_domain("retail"), [0], tmp_path, gaps=[("money_moves", "2+")], budget=120, diagnose_size=0)
    assert plans[-1].extra["probe_size"] == got["probe_size"] == 120
    got = discovery.bench(get_domain("retail"), [0], tmp_path, gaps=[("money_moves", "2+")], probe_size=0, diagnose_size=0)
    assert plans[-1].extra["probe_size"] == got["probe_size"] == 0


def test_bad_input_is_one_line_before_any_work(tmp_path):
    from evosyn.flows.cli import main

    for extra, says in ((["--seeds", "2-0"], "--seeds 2-0"), (["--gap", "multi_item=maybe"], "not a bucket"),
                        (["--factor", "turns"], "--factor turns"),
                        (["--gap", "multi_item=yes", "--factor", "multi_item"], "--factor multi_item"),
                        (["--domain", "mars"], "--domain mars: unknown domain")):
        res = CliRunner().invoke(main, ["bench", "discovery", "--home", str(tmp_path / "h"), *extra])
        assert res.exit_code == 2 and says in res.output, res.output
        assert len(res.output.strip().splitlines()) == 1
    assert not (tmp_path / "h").exists()


@pytest.mark.slow
def test_bench_discovery_end_to_end(tmp_path, monkeypatch):
    """One gap, one seed, two rounds, from the paper's space (``--space paper``: num_write and num_read in v1):
    both arms run with the planted prior (the suppressed bucket is rare in their data), the control promotes an
    evidence-free draw, and the JSON names what each arm adopted."""
    from evosyn.benchmarks.learning import Plan, _run_id
    from evosyn.flows.cli import main
    from evosyn.storage.store import Store
    from tests.benchmarks.test_learning import PREFECT_HOME

    monkeypatch.setenv("PREFECT_HOME", PREFECT_HOME)
    monkeypatch.setenv("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "300")
    home, out = tmp_path / "h", tmp_path / "d.json"
    args = ["bench", "discovery", "--domain", "airline", "--seeds", "0", "--gap", "multi_item=yes", "--keep", "0",
            "--rounds", "2", "--budget", "30", "--test-size", "8", "--diagnose-size", "8", "--space", "paper",
            "--home", str(home),
            "--output", str(out)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output[-3000:]
    data = json.loads(out.read_text())
    assert data["gaps"] == ["multi_item=yes"] and data["runs_launched"] == 2
    assert data["initial_factors"] == ["num_write", "num_read"] and "--space paper" in data["command"]
    rows = {r["arm"]: r for r in data["rows"]}
    assert set(rows) == {"evosyn", "no_feedback"} and data["verdicts"][0]["seeds"] == 1
    control = rows["no_feedback"]["per_seed"][0]
    assert data["diagnosis"]["tasks"] > 0 and "diagnosis" not in control  # only the feedback arm is diagnosed
    (why,) = rows["evosyn"]["per_seed"][0]["diagnosis"]  # round 1: the one reflection that can adopt
    assert why["round"] == 1 and why["planted"]["coverage"] == 0.0 and why["planted"]["n"] >= 0
    # the factors the runs started with are in the space: no gap of theirs is counted against the planted one
    assert "multi_item" in why["properties"] and not {"num_write", "num_read"} & set(why["properties"])
    assert [p["rule"] for p in control["promoted"]] == ["evidence-free draw"] * 2
    assert control["recovered"] == any(p["factor"] == "multi_item" and p["round"] < 2 for p in control["promoted"])
    store = Store(home, create=False)
    plan = Plan(domain="airline", seeds=[0], home=home, rounds=2, budget=30, test_size=8,
                extra={"prior": {"suppress": {"multi_item": {"yes": 0.0}}},
                       "initial_factors": ["num_write", "num_read"]})
    for row in data["rows"]:
        run_id = row["per_seed"][0]["run_id"]
        assert run_id == _run_id(plan, row["arm"], 0)  # the planted prior is part of each run's config
        verdicts = [v for v in store.read_records("verdicts", run_id=run_id, round=1) if v.passed]
        assert verdicts and all(v.observed["multi_item"] == ["no"] for v in verdicts)  # kept with p = 0
        (initial,) = store.read_records("spaces", run_id=run_id, round=0)
        assert [(f.key, f.status) for f in initial.factors[-2:]] == [("num_write", "standard"), ("num_read", "standard")]
        requested = [t.requested for t in store.read_records("tasks", run_id=run_id, round=1)]
        assert requested and all(t["num_write"] and t["num_read"] for t in requested)  # round 1 steers by them
        assert all(p["factor"] not in ("num_write", "num_read") for p in row["per_seed"][0]["promoted"])


def test_gaps_rank_under_covered_buckets_by_failure_excess():
    from collections import Counter

    from evosyn.benchmarks.discovery_gaps import gaps_at

    buckets = {"multi_item": ["no", "yes"], "money_moves": ["0", "1", "2+"]}
    coverage = {"multi_item": Counter(no=95, yes=5), "money_moves": Counter({"0": 60, "1": 39, "2+": 1})}
    scored = {"multi_item": [("no", True)] * 8 + [("no", False)] * 2 + [("yes", False)] * 3 + [("yes", True)] * 2,
              "money_moves": [("0", True)] * 9 + [("0", False)] + [("1", True)] * 5 + [("2+", False)] * 4}
    gaps = gaps_at(coverage, scored, buckets)
    # money_moves=2+ fails 1.00 against 0.07 elsewhere; multi_item=yes 0.60 against 0.20
    assert [g["gap"] for g in gaps] == ["money_moves=2+", "multi_item=yes"]
    assert gaps[1] == {"gap": "multi_item=yes", "coverage": 0.05, "fail": 0.6, "fail_elsewhere": 0.2, "excess": 0.4,
                       "n": 5}
    # a well-covered bucket, or one failing no more than the rest, is no gap
    coverage["multi_item"] = Counter(no=50, yes=50)
    scored["money_moves"] = [("0", False)] * 5 + [("2+", False)]
    assert gaps_at(coverage, scored, buckets) == []


def test_a_planted_bucket_the_learner_does_not_fail_more_often_in_is_reported_as_no_weakness():
    from evosyn.benchmarks.discovery import weakness

    def row(arm, diagnoses):
        return {"arm": arm, "gap": "entities_touched=3+", "per_seed": [{"diagnosis": diagnoses}]}

    def d(fail, rest, in_space=False):
        return {"in_space": in_space, "planted": {"fail": fail, "fail_elsewhere": rest}}

    less = [row("evosyn", [d(0.19, 0.26), d(0.25, 0.25), d(0.9, 0.1, in_space=True)]),
            row("no_feedback", [d(0.9, 0.1)])]  # the control is never diagnosed: ignored
    assert weakness(less, "entities_touched=3+") == {"weakness": "no", "weaker_in": 0, "diagnosed": 2}
    more = [row("evosyn", [d(0.74, 0.54), d(0.72, 0.50)])]
    assert weakness(more, "entities_touched=3+")["weakness"] == "yes"
    assert weakness([row("evosyn", [d(0.74, 0.54), d(0.2, 0.5)])], "entities_touched=3+")["weakness"] == "mixed"
    assert weakness([row("evosyn", [])], "entities_touched=3+")["weakness"] is None
    assert weakness(more, "money_moves=2+")["weakness"] is None  # another gap's rows


@pytest.mark.slow
def test_a_planted_bucket_keeps_about_keep_of_its_natural_share():
    """``bench discovery``'s default gaps on airline, 3,000 cold-start blueprints: the bucket's share under the
    prior over its share without it is within 0.1 of ``keep`` (one draw per blueprint: planning again never gives
    a refused bucket a second chance); ``keep`` 1 changes no plan."""
    from evosyn.agents.plans import DefaultPrior
    from tests.envs.test_properties import _planned

    keep, n = 0.2, 3000
    for prop, value in gaps_for(get_domain("airline")):
        natural = _planned(DefaultPrior(), prop, n)
        planted = _planned(DefaultPrior(suppress={prop: {value: keep}}), prop, n)
        share = (planted.count(value) / len(planted)) / (natural.count(value) / len(natural))
        assert abs(share - keep) <= 0.1, (prop, value, share)
        assert len(planted) >= 0.99 * len(natural), (prop, value, len(planted))  # refused plans are planned again
    assert _planned(DefaultPrior(suppress={prop: {value: 1.0}}), prop, 400) == _planned(DefaultPrior(), prop, 400)
