"""`evosyn compare` over runs of several domains: one table with a domain column, rows grouped by domain, arm."""
import math

import pytest

from evosyn.envs.packs import get_domain
from evosyn.storage.store import Store
from evosyn.tasks.reports.compare import COLUMNS, MEAN_COLUMNS, compare, markdown
from tests.storage.samples import samples

S = samples()
DOMAINS = ("retail", "airline")  # two domains with reference sets; written out of order on purpose
ARMS = ("static", "evosyn")
ENVS = {d: get_domain(d) for d in DOMAINS}  # what `evosyn compare` resolves once per domain


def rec(table, run_id, round=1, **fields):
    return S[table].model_copy(update={"run_id": run_id, "round": round, **fields})


def obs(pattern):
    return {"num_write": ["1"], "trajectory_pattern": [pattern], "tool_use_pattern": ["none"]}


@pytest.fixture()
def store(tmp_path):
    st = Store(tmp_path)
    for d in DOMAINS:
        for arm in ARMS:
            rid = f"{d}-{arm}-0"
            n = 2 if arm == "evosyn" else 1  # the evosyn runs verify more
            st.write([rec("runs", rid, domain=d, arm=arm, seed=0)], f"{rid}-run")
            st.write([rec("tasks", rid, task_id=f"{rid}-t{i}", requested={"num_write": ["1"]}) for i in range(n)],
                     f"{rid}-tasks")
            st.write([rec("verdicts", rid, verdict_id=f"{rid}-v{i}", task_id=f"{rid}-t{i}", passed=True,
                          observed=obs(f"{d}-p{i}")) for i in range(n)], f"{rid}-verdicts")
            st.write([rec("evaluations", rid, evaluation_id=f"{rid}-e{k}", task_id=f"x{k}", task_set=ts,
                          success=ok, observed=obs("R")) for k, (ts, ok) in
                      enumerate([("diagnostic", True), ("diagnostic", arm == "evosyn"), ("test", True)])],
                     f"{rid}-evals")
    return st


def test_one_table_across_domains(store):
    ids = store.runs()
    result = compare(store, ids, ENVS, draws=10)
    rows = result["rows"]
    assert COLUMNS[0] == "domain" and "domain" not in MEAN_COLUMNS
    assert [(r["domain"], r["arm"]) for r in rows] == [("airline", "evosyn"), ("airline", "static"),
                                                       ("retail", "evosyn"), ("retail", "static")]
    assert all(r["run_id"].startswith(r["domain"] + "-" + r["arm"]) for r in rows)
    # diversity is normalized per domain: each domain's union holds only its own runs' patterns
    assert result["pattern_union"] == {d: [f"{d}-p0", f"{d}-p1"] for d in sorted(DOMAINS)}
    assert result["size_matched_n"] == {"airline": 1, "retail": 1}
    assert {(r["domain"], r["arm"]): r["success_diagnostic"] for r in rows} == {
        ("airline", "evosyn"): 1.0, ("airline", "static"): 0.5, ("retail", "evosyn"): 1.0, ("retail", "static"): 0.5}
    assert [(m["domain"], m["arm"], m["runs"]) for m in result["arm_means"]] == [
        ("airline", "evosyn", 1), ("airline", "static", 1), ("retail", "evosyn", 1), ("retail", "static", 1)]
    md = markdown(result)
    head = next(line for line in md.splitlines() if line.startswith("| run_id"))
    assert head.split(" | ")[:3] == ["| run_id", "domain", "arm"]
    body = [line for line in md.splitlines() if line.startswith(("| airline-", "| retail-"))]
    assert [line.split(" | ")[1] for line in body] == ["airline", "airline", "retail", "retail"]
    assert all(not math.isnan(r["factor_coverage"]) for r in rows)


def test_readable_headings_and_a_legend(store):
    from evosyn.tasks.reports.legend import METRICS

    result = compare(store, store.runs(), ENVS, draws=10)
    assert list(result["legend"]) == [*COLUMNS, "runs"]  # every column explained, in the table's order
    for name, entry in result["legend"].items():
        assert entry == {"label": METRICS[name].label, "means": METRICS[name].means, "range": METRICS[name].range,
                         "better": METRICS[name].better}
    md = markdown(result)
    head = next(line for line in md.splitlines() if line.startswith("| run_id"))
    assert "gap vs allocation (Spearman)" in head and "gap_allocation_spearman" not in head
    assert "trajectory diversity (own)" in head and "trajectory diversity (union)" in head
    legend = md.split("## Legend", 1)[1]
    assert "- targeted improvement rate: of the weak slices" in legend and "higher is better" in legend
