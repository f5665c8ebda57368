"""`evosyn report` on a real 3-round run: plots, legend, samples, trace without phantom transitions,
one value per metric name, a page with no external resource (slow: builds two small runs once)."""
from __future__ import annotations

import re

import pytest

from evosyn.envs.packs import get_domain
from evosyn.storage.records import Run
from evosyn.storage.store import Store
from evosyn.tasks.reports import data as D
from evosyn.tasks.reports.compare import compare
from evosyn.tasks.reports.legend import METRICS
from evosyn.tasks.metrics import intrinsic, verified_samples
from evosyn.tasks.reports.report import COLS, UNION_COLS, write_report
from tests.tasks import driver
from tests.storage.samples import samples

pytestmark = pytest.mark.slow
MAIN, OTHER = "rep-evosyn", "rep-static"
ENVS = {"airline": get_domain("airline")}  # what `evosyn report` resolves from the runs' domains


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    st = Store(tmp_path_factory.mktemp("report-store"))
    for rid, arm, rounds, budget in ((MAIN, "evosyn", 3, 16), (OTHER, "static", 2, 8)):
        driver.run(st, run_id=rid, rounds=rounds, budget=budget, arm=arm)
        st.write([Run(run_id=rid, round=0, domain="airline", arm=arm, rounds=rounds, budget=budget,
                      status="finished")], "run")
    return st


@pytest.fixture(scope="module")
def single(store, tmp_path_factory):
    out = tmp_path_factory.mktemp("report-single")
    page, md = write_report(store, MAIN, [], out, ENVS)
    return page.read_text(), md.read_text()


@pytest.fixture(scope="module")
def compared(store, tmp_path_factory):
    out = tmp_path_factory.mktemp("report-compare")
    page, md = write_report(store, MAIN, [OTHER], out, ENVS)
    return page.read_text(), md.read_text()


def _section(page: str, anchor: str) -> str:
    m = re.search(rf"<section id='{anchor}'>(.*?)</section>", page, re.S)
    assert m, f"no section {anchor}"
    return m.group(1)


def test_the_page_has_every_plot_as_an_embedded_png(single):
    page, _ = single
    for anchor, alt in (("success", "success over rounds"), ("slices", "per-slice success over rounds"),
                        ("allocation", "allocation over factor values"), ("probes", "failure rate per probe bucket")):
        body = _section(page, anchor)
        m = re.search(r"<img class='plot' alt='([^']*)' src='data:image/png;base64,([A-Za-z0-9+/=]+)'", body)
        assert m and m.group(1) == alt, anchor
        assert len(m.group(2)) > 5000  # a drawn figure, not an empty image
    assert "95% Wilson" in _section(page, "success")


def test_the_page_is_self_contained(single, compared):
    for page, _ in (single, compared):
        assert not re.search(r"""(src|href)\s*=\s*['"]?\s*(https?:)?//""", page, re.I)
        assert "<script" not in page and "<link" not in page
        assert all(src.startswith("data:image/") for src in re.findall(r"src='([^']*)'", page))
        assert all(h.startswith("#") for h in re.findall(r"href='([^']*)'", page))


def test_no_phantom_transition_in_a_three_round_run(store, single):
    assert D.rounds_ran(store, MAIN) == [1, 2, 3]
    spaces = {s.round: s.version for s in store.read_records("spaces", run_id=MAIN)}
    trace = D.trace(store, MAIN, ENVS)
    expected = ["1 -> 2", "2 -> 3"]
    if spaces[3] != spaces[2]:  # the Reflector changed the space after the last round: proposed, not run
        expected.append("after 3: proposed for round 4 (not run)")
    assert [t["transition"] for t in trace] == expected
    page, md = single
    assert "3 -&gt; 4" not in page and "3 -> 4" not in md
    assert "1 -&gt; 2" in _section(page, "trace") and "2 -&gt; 3" in _section(page, "trace")
    assert "3 of 3 rounds ran" in page


def test_an_update_after_the_last_round_is_shown_as_proposed(tmp_path):
    """A run whose Reflector revised the space after its last round (round 2): the update is proposed for round 3,
    which did not run; an earlier change shows as the transition's space diff."""
    S = samples(run_id="r", space_version=1)
    st = Store(tmp_path)
    st.write([S["runs"].model_copy(update={"round": 0, "rounds": 3})], "run")
    for rnd, version in ((0, 1), (1, 2), (2, 3)):
        st.write([S["spaces"].model_copy(update={"round": rnd, "version": version, "parent_version": version - 1
                                                  if version > 1 else None, "diff": S["spaces"].diff if rnd else []})],
                 f"space-{rnd}")
    for rnd in (1, 2):
        st.write([S["evaluations"].model_copy(update={"round": rnd, "evaluation_id": f"e{rnd}"})], f"eval-{rnd}")
    review = S["reflections"].dimension_reviews[0].model_copy(update={"evidence": "success on 3-4: 0.20 -> 0.60"})
    st.write([S["reflections"].model_copy(update={"round": 2, "dimension_reviews": [review]})], "reflect-2")
    trace = D.trace(st, "r", ENVS)
    assert [t["transition"] for t in trace] == ["1 -> 2", "after 2: proposed for round 3 (not run)"]
    assert trace[0]["reviews"] == "" and trace[1]["reviews"] == "num_write: promote (success on 3-4: 0.20 -> 0.60)"
    assert trace[0]["space"].startswith("v1 -> v2: add_factor num_write")
    assert trace[1]["space"].startswith("v2 -> v3") and trace[1]["designer_focus"] == "-"


def test_legend_explains_every_metric_shown(single, compared):
    for page, md in (single, compared):
        legend = _section(page, "legend")
        for name in UNION_COLS if "trajectory diversity (union)" in page else COLS:
            assert f"<code>{name}</code>" in legend, name
            assert METRICS[name].label in md
        assert "better" in legend and "range" in legend


def test_samples_are_rendered_as_chat(store, single):
    page, _ = single
    body = _section(page, "samples")
    picked = D.sample_trajectories(store, MAIN, ENVS, per_slice=2)
    families = {s["value"] for s in picked}
    assert len(families) > 1 and all(sum(s["value"] == f for s in picked) <= 2 for f in families)
    assert body.count("class='chat'") == len(picked)
    assert body.count("<details open>") == len(families)  # the first sample of each family unfolded
    for cls in ("msg user", "msg assistant", "msg tool", "class='call'"):
        assert cls in body, cls
    first = picked[0]
    call = next(c for m in first["messages"] for c in m.tool_calls)
    assert f"&rarr; {call.name}(" in body  # a tool call with its arguments
    assert "<b>user's goal:</b>" in body


def test_one_value_per_metric_name(store, single, compared):
    """The report's trajectory_diversity is the run summary's (own patterns, flows/run.py); the union value has
    its own name, and equals `evosyn compare`'s."""
    rows = D.run_rows(store, MAIN, ENVS)
    for row in rows:
        own = intrinsic(verified_samples(store, MAIN, row["round"]), ENVS["airline"].pack)  # what the run summary logs
        assert row["trajectory_diversity"] == pytest.approx(own["trajectory_diversity"])
        assert "trajectory_diversity_union" not in row
    result = compare(store, [MAIN, OTHER], ENVS, draws=10)
    for r in result["rows"]:
        own = intrinsic(verified_samples(store, r["run_id"], r["round"]), ENVS["airline"].pack)
        assert r["trajectory_diversity"] == pytest.approx(own["trajectory_diversity"])
    by = {(r["run_id"], r["round"]): r for r in result["rows"]}
    union_rows = D.run_rows(store, MAIN, ENVS, {p for ps in result["pattern_union"].values() for p in ps})
    for row in union_rows:
        assert row["trajectory_diversity_union"] == pytest.approx(by[(MAIN, row["round"])]["trajectory_diversity_union"])
    _, md = compared
    assert "trajectory diversity (own)" in md and "trajectory diversity (union)" in md
    _, md_single = single
    assert "trajectory diversity (union)" not in md_single.split("## Legend")[0]


def test_compared_runs_show_success_per_arm_with_wilson_intervals(store, compared):
    arms = D.arm_success(store, [MAIN, OTHER])
    assert {(a["arm"], a["task_set"]) for a in arms} == {(arm, ts) for arm in ("evosyn", "static")
                                                         for ts in ("test", "test_uniform", "diagnostic")}
    for a in arms:
        assert a["ci_low"] <= a["success"] <= a["ci_high"] and 0 <= a["ci_low"] and a["ci_high"] <= 1
        assert a["ci_high"] - a["ci_low"] > 0
    assert {a["round"] for a in arms if a["arm"] == "static"} == {1, 2}
    page, md = compared
    assert "one line per arm" in _section(page, "success")
    assert "## Success over rounds per arm (95% Wilson interval over test tasks)" in md


def test_allocation_is_stacked_by_factor_value(store):
    alloc = D.allocation(store, MAIN)
    directions = store.read_records("directions", run_id=MAIN)
    for r in (1, 2, 3):
        asked = sum(d.n_blueprints for d in directions if d.round == r)
        for f in {a["factor"] for a in alloc}:
            # every factor's stack adds up to the round's blueprints (a direction's share is split over its values)
            assert sum(a["blueprints"] for a in alloc if a["factor"] == f and a["round"] == r) == pytest.approx(asked)
    assert len({a["value"] for a in alloc if a["factor"] == "task_family"}) > 1
