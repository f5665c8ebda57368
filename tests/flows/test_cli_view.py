"""`evosyn show`, `runs`, `preview` on a real store of three small synth passes (airline, retail, telecom)."""
import json

import pytest
from click.testing import CliRunner

from evosyn.flows.cli import main
from evosyn.storage.catalog import query
from evosyn.storage.records import CheckResult, Verdict
from evosyn.storage.store import Store

DOMAINS = ("airline", "retail", "telecom")


def cli(home, *args):
    return CliRunner().invoke(main, ["--home", str(home), *args], catch_exceptions=False)


def run_of(domain: str) -> str:
    return f"synth-{domain}-s0-n3"


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("view") / "h"
    for domain in DOMAINS:
        out = cli(home, "synth", "--domain", domain, "--n", "3")
        assert out.exit_code == 0, out.output[-1500:]
    return home


def first(home, sql: str) -> dict:
    return query(sql, Store(home, create=False)).to_pylist()[0]


def snapshot(root):
    return sorted((str(p.relative_to(root)), p.stat().st_mtime_ns) for p in root.rglob("*"))


@pytest.mark.parametrize("domain", DOMAINS)
def test_show_a_task_renders_its_trajectory_and_verdict_in_pipeline_order(home, domain):
    row = first(home, f"select t.task_id, r.trajectory_id, v.verdict_id, r.messages from tasks t "
                      f"join trajectories r using (task_id) join verdicts v using (trajectory_id) "
                      f"where t.run_id = '{run_of(domain)}' and v.passed order by t.task_id limit 1")
    out = cli(home, "show", row["task_id"])
    assert out.exit_code == 0, out.output
    text = out.stdout
    heads = [text.index(f"task {row['task_id']}"), text.index(f"trajectory {row['trajectory_id']}"),
             text.index(f"verdict {row['verdict_id']}")]
    assert heads == sorted(heads)  # blueprint -> task -> trajectory -> verdict
    call = next(c for m in json.loads(row["messages"]) for c in m["tool_calls"])
    line = next(x for x in text.splitlines() if f"{call['name']}(" in x and "→" in x)  # each tool call ...
    assert "assistant →" in line and all(f"{k}=" in line for k in call["arguments"])  # ... with its arguments ...
    assert "← tool" in text  # ... and its result
    assert "│ user " in text and "│ assistant " in text and "reason_for_call" in text
    for check in ("executable", "replay", "state", "actions", "policy"):
        assert check in text
    assert "PASSED" in text and str(home) in text.splitlines()[0]


@pytest.mark.parametrize("domain", DOMAINS)
def test_show_a_trajectory_a_verdict_and_a_blueprint(home, domain):
    row = first(home, f"select blueprint_id, trajectory_id, verdict_id, task_id from verdicts "
                      f"where run_id = '{run_of(domain)}' and passed order by verdict_id limit 1")
    kinds = lambda rid: [f["kind"] for f in json.loads(cli(home, "show", rid, "--json").stdout)]  # noqa: E731
    assert kinds(row["trajectory_id"]) == ["trajectory", "verdict", "example"]  # itself and what names it
    assert kinds(row["verdict_id"]) == ["verdict"]
    assert kinds(row["blueprint_id"]) == ["blueprint", "task", "trajectory", "verdict", "example"]
    traj = cli(home, "show", row["trajectory_id"]).stdout
    assert f"─ trajectory {row['trajectory_id']}" in traj and f"─ verdict {row['verdict_id']}" in traj
    assert f"─ task {row['task_id']}" not in traj
    verdict = cli(home, "show", row["verdict_id"]).stdout
    assert f"─ verdict {row['verdict_id']}" in verdict and "─ trajectory" not in verdict
    assert "check" in verdict and "reason" in verdict and "observed" in verdict
    assert "PASSED · tau2-bench reward 1 · attempt" in verdict  # the benchmark whose rule the reward is
    chain = cli(home, "show", row["blueprint_id"]).stdout
    heads = [chain.index(k) for k in (f"─ blueprint {row['blueprint_id']}", f"─ task {row['task_id']}",
                                      f"─ trajectory {row['trajectory_id']}", f"─ verdict {row['verdict_id']}")]
    assert heads == sorted(heads) and "intent" in chain and "dimensions" in chain


def test_show_json_prints_the_raw_records(home):
    row = first(home, f"select task_id from tasks where run_id = '{run_of('retail')}' order by task_id limit 1")
    out = cli(home, "show", row["task_id"], "--json")
    assert out.exit_code == 0
    found = json.loads(out.stdout)
    assert [f["kind"] for f in found] == ["task", "trajectory", "verdict", "example"]
    assert found[0]["record"]["task_id"] == row["task_id"] and found[0]["matched"] == "task_id"
    assert all(f["record"]["task_id"] == row["task_id"] for f in found[1:])


def test_a_failed_check_shows_its_reason(tmp_path):
    store = Store(tmp_path / "h")
    store.write([Verdict(run_id="r", round=1, blueprint_id="b1", verdict_id="v-bad", task_id="t1",
                         trajectory_id="tr-1", reward=0.0, passed=False,
                         checks=[CheckResult(name="state", passed=False, reason="DB hash differs [flights]"),
                                 CheckResult(name="policy", passed=True),
                                 CheckResult(name="factors", passed=False, skipped=True)])], "c")
    text = cli(store.root, "show", "v-bad").stdout
    assert "REJECTED" in text and "FAIL" in text and "DB hash differs [flights]" in text  # markup-free
    assert "skipped" in text and "failed: state" in text


def test_unknown_id_is_one_line_naming_the_store(tmp_path, home):
    for root in (home, tmp_path / "nowhere"):
        out = CliRunner().invoke(main, ["--home", str(root), "show", "no-such-id"])
        assert out.exit_code == 2 and out.stdout == ""
        said = "error: no-such-id: no record" if root == home else "error: store root"  # no store: said first
        assert out.stderr.count("\n") == 1 and out.stderr.startswith(said)
        assert str(root) in out.stderr and "--home" in out.stderr and "EVOSYN_HOME" in out.stderr
    assert not (tmp_path / "nowhere").exists()


def test_runs_lists_every_pass_with_its_counts(home):
    out = cli(home, "runs")
    assert out.exit_code == 0
    assert out.stdout.splitlines()[0] == f"store {home.absolute()}: 3 runs"
    for domain in DOMAINS:
        line = next(x for x in out.stdout.splitlines() if run_of(domain) in x)
        verified = first(home, f"select count(*) as n from verdicts where run_id = '{run_of(domain)}' and passed")["n"]
        assert domain in line and "synth" in line and "finished" in line and f"│ {verified} " in line
    data = json.loads(cli(home, "runs", "--format", "json").stdout)
    assert data["store"] == str(home.absolute())
    assert sorted(r["run_id"] for r in data["runs"]) == sorted(map(run_of, DOMAINS))
    assert {r["domain"] for r in data["runs"]} == set(DOMAINS) and all(r["seed"] == 0 for r in data["runs"])


def test_runs_on_an_empty_store(tmp_path):
    (tmp_path / "empty").mkdir()
    out = cli(tmp_path / "empty", "runs")
    assert out.exit_code == 0 and "0 runs" in out.stdout and list((tmp_path / "empty").iterdir()) == []
    out = cli(tmp_path / "none", "runs")  # no store at all: one line, exit 2, nothing written
    assert out.exit_code == 2 and "no store there" in out.stderr and not (tmp_path / "none").exists()


@pytest.mark.parametrize("domain", DOMAINS)
def test_preview_shows_n_samples_and_writes_no_run(home, domain):
    before = snapshot(home)
    out = cli(home, "preview", "--domain", domain, "--n", "2", "--seed", "4")
    assert out.exit_code == 0, out.output[-1500:]
    text = out.stdout
    assert "sample 1/2" in text and "sample 2/2" in text and "sample 3/" not in text
    assert text.count("user instruction") + text.count("no task:") == 2
    assert "trajectory tr-" in text and "verdict " in text and f"preview: 2 samples on {domain}" in text
    assert "task_family=" in text  # the blueprint summary
    assert snapshot(home) == before  # no new run, nothing touched
    assert f"preview-{domain}" not in cli(home, "runs").stdout


def test_preview_refuses_an_unknown_domain(tmp_path):
    out = CliRunner().invoke(main, ["--home", str(tmp_path / "h"), "preview", "--domain", "bank"])
    assert out.exit_code == 2 and out.stderr.startswith("error: --domain bank: unknown domain")
