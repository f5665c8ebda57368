"""`evosyn dedup --run RUN`: the check over any run, its counts, and its one-line refusals."""
from __future__ import annotations

import json

from evosyn.storage.records import Run
from evosyn.storage.store import Store
from tests.flows.test_cli import evosyn


def test_dedup_checks_a_synth_pass_and_prints_its_counts(tmp_path):
    home = tmp_path / "h"
    assert evosyn("synth", "--domain", "airline", "--n", "16", "--seed", "3", home=home).returncode == 0
    out = evosyn("dedup", "--run", "synth-airline-s3-n16", home=home)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "round 0" in out.stdout and "official_test" in out.stdout
    assert "evosyn testsets --domain airline --n 300" in out.stdout  # no test set built in this store: said so
    again = evosyn("dedup", "--run", "synth-airline-s3-n16", "--format", "json", home=home)
    result = json.loads(again.stdout)
    assert result["domain"] == "airline" and result["rounds"]["0"]["checked"] == 16
    q = evosyn("query", "select count(*) as n from dedup where run_id = 'synth-airline-s3-n16'", "--format", "json",
               home=home)
    assert json.loads(q.stdout) == {"n": 16}


def test_dedup_refuses_an_unknown_run_and_a_new_threshold_for_a_run_that_dropped(tmp_path):
    home = tmp_path / "h"
    assert evosyn("synth", "--domain", "airline", "--n", "4", "--seed", "1", home=home).returncode == 0
    out = evosyn("dedup", "--run", "nope", home=home)
    assert out.returncode == 2 and out.stderr.startswith("error: --run nope: no such run")
    Store(home).write([Run(run_id="airline-x", round=0, domain="airline", rounds=1, budget=4,
                           config_json=json.dumps({"domain": "airline", "dedup": {"drop": True}}))], "run")
    out = evosyn("dedup", "--run", "airline-x", "--threshold", "0.9", home=home)
    assert out.returncode == 2 and "dedup.drop" in out.stderr and len(out.stderr.strip().splitlines()) == 1
