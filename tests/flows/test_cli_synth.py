import json

from tests.flows.test_cli import evosyn


def test_synth_writes_the_store_and_prints_yield(tmp_path):
    home = tmp_path / "h"
    out = evosyn("synth", "--domain", "airline", "--n", "24", "--seed", "2", home=home)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "24 of 24 blueprints verified" in out.stdout and "flight_cancellation" in out.stdout
    q = evosyn("query", "select count(*) as n from tasks where run_id = 'synth-airline-s2-n24'", "--format", "json",
               home=home)
    assert json.loads(q.stdout) == {"n": 24}
    for table in ("directions", "blueprints", "trajectories", "verdicts"):
        q = evosyn("query", f"select count(*) as n from {table}", "--format", "json", home=home)
        assert json.loads(q.stdout)["n"] > 0


def test_bad_space_file_is_one_line(tmp_path):
    bad = tmp_path / "space.json"
    bad.write_text(json.dumps({"factors": [{"key": "task_family", "values": []}]}))
    out = evosyn("synth", "--n", "3", "--space", str(bad), home=tmp_path / "h")
    assert out.returncode == 2 and out.stderr.startswith("error: --space") and out.stderr.count("\n") == 1
    assert not (tmp_path / "h").exists()


def test_unknown_domains_are_refused_clearly(tmp_path):
    out = evosyn("synth", "--domain", "bank", "--n", "3", home=tmp_path / "h")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert out.stderr.startswith("error: --domain bank: unknown domain (known domains: airline, ")
    # an ontology-only pack has a space but nothing to run tasks in
    out = evosyn("synth", "--domain", "car_bench", "--n", "3", home=tmp_path / "h")
    assert out.returncode == 2 and "unknown domain" in out.stderr and not (tmp_path / "h").exists()
