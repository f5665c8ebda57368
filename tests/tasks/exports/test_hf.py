"""`evosyn export --format hf`: shards + dataset card that `datasets.load_dataset` reads back exactly."""
import json
import os
import re
import socket
import subprocess
import sys
from collections import Counter

import pytest
import yaml

from evosyn.tasks.exports.hf_card import FIELDS
from evosyn.tasks.exports.hf import SCHEMA, hf_rows, select_examples, write_hf
from evosyn.storage.catalog import query
from evosyn.storage.store import Store

datasets = pytest.importorskip("datasets")  # the [dev] extra

RUN = "synth-telecom-s3-n40"


def evosyn(*args, home, env=None):
    full = {**os.environ, "EVOSYN_HOME": str(home), **(env or {})}
    full = {k: v for k, v in full.items() if v is not None}
    return subprocess.run([sys.executable, "-m", "evosyn.flows.cli", *args], capture_output=True, text=True, env=full,
                          timeout=180)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("hf") / "h"
    out = evosyn("synth", "--domain", "telecom", "--n", "40", "--seed", "3", home=home)
    assert out.returncode == 0, out.stderr[-1500:]
    return home


def card(path):
    text = (path / "README.md").read_text()
    head, body = re.match(r"^---\n(.*?)\n---\n(.*)$", text, re.S).groups()
    return yaml.safe_load(head), body


def card_counts(body: str, key: str) -> dict[str, int]:
    section = body.split(f"### {key}\n", 1)[1].split("\n\n#", 1)[0]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    return {r[0].lstrip("| "): int(r[1]) for r in rows[1:]}


def test_load_dataset_yields_exactly_the_runs_verified_training_examples(home, tmp_path):
    out_dir = tmp_path / "ds"
    out = evosyn("export", "--run", RUN, "--format", "hf", "--output", str(out_dir), home=home)
    assert out.returncode == 0, out.stderr[-1500:]
    store = Store(home, create=False)
    q = lambda sql: query(sql, store).to_pylist()  # noqa: E731
    want = {r["example_id"] for r in q(f"select example_id from sft_examples where run_id = '{RUN}' and split = 'train'")}
    held = q(f"select count(*) as n from sft_examples where run_id = '{RUN}' and split = 'diagnostic'")[0]["n"]
    assert want and held > 0
    assert out.stdout.strip() == f"exported {len(want)} training examples (hf) to {out_dir}; held out {held} " \
                                 "diagnostic; dropped 0"
    assert [p.name for p in sorted((out_dir / "data").iterdir())] == ["train-00000-of-00001.parquet"]

    ds = datasets.load_dataset(str(out_dir), cache_dir=str(tmp_path / "cache"))
    assert list(ds) == ["train"] and ds["train"].num_rows == len(want)
    assert set(ds["train"]["example_id"]) == want
    # each row is its stored example: messages in order, tool-call arguments as JSON text
    ex = store.read_records("sft_examples", run_id=RUN)
    by_id = {e.example_id: e for e in ex}
    for row in ds["train"].select(range(3)):
        stored = by_id[row["example_id"]]
        assert [m["role"] for m in row["messages"]] == [m.role for m in stored.messages]
        calls = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for m in row["messages"]
                 for c in m["tool_calls"]]
        assert calls == [(c.name, c.arguments) for m in stored.messages for c in m.tool_calls]
        assert json.loads(row["tools"]) == stored.tools and row["domain"] == "telecom"

    meta, body = card(out_dir)
    assert meta["license"] == "apache-2.0" and "tool-use" in meta["tags"] and meta["task_categories"]
    assert meta["configs"][0]["data_files"][0] == {"split": "train", "path": "data/train-*"}
    info = meta["dataset_info"]
    assert info["splits"][0]["num_examples"] == len(want)
    assert info["features"] == datasets.Features.from_arrow_schema(SCHEMA)._to_yaml_list()
    assert list(FIELDS) == SCHEMA.names  # the card explains every column
    assert ds["train"].features == datasets.Features.from_arrow_schema(SCHEMA)
    # the card's counts are the store's: per slice (as the verifier observed it) and per check
    for key in ("task_family", "expected_outcome", "num_write"):
        rows = q(f"select json_extract_string(v.observed, '$.{key}[0]') as value, count(*) as n from sft_examples e "
                 f"join verdicts v on v.trajectory_id = e.trajectory_id and v.passed "
                 f"where e.run_id = '{RUN}' and e.split = 'train' group by 1")
        assert card_counts(body, key) == {r["value"]: r["n"] for r in rows}, key
    kept = q(f"select count(*) as n from verdicts where run_id = '{RUN}' and passed")[0]["n"]
    assert f"**kept {kept}**" in body and f"Exported **{len(want)}** training examples; held out {held}" in body
    verdicts = q(f"select count(*) as n from verdicts where run_id = '{RUN}'")[0]["n"]
    assert f"Each check over all {verdicts} verdicts" in body
    assert f"`{RUN}`" in body and '"budget": 40' in body and "telecom" in meta["tags"]


def test_shards_split_the_rows_and_a_new_export_replaces_old_shards(home, tmp_path):
    store = Store(home, create=False)
    chosen = select_examples(store, RUN)
    out = tmp_path / "ds"
    res = write_hf(store, RUN, chosen, out, shard_rows=7)
    n = -(-res.rows // 7)
    assert n >= 3 and [p.name for p in res.files] == [f"train-{i:05d}-of-{n:05d}.parquet" for i in range(n)]
    ds = datasets.load_dataset(str(out), split="train", cache_dir=str(tmp_path / "c1"))
    assert ds["example_id"] == [e.example_id for e in chosen.train]  # in (round, example id) order
    again = write_hf(store, RUN, chosen, out)
    assert sorted(p.name for p in (out / "data").iterdir()) == ["train-00000-of-00001.parquet"] == \
        [p.name for p in again.files]
    assert datasets.load_dataset(str(out), split="train", cache_dir=str(tmp_path / "c2")).num_rows == res.rows


def test_an_example_without_a_passing_verdict_is_dropped_with_its_reason(home):
    store = Store(home, create=False)
    chosen = select_examples(store, RUN)
    orphan = chosen.train[0].model_copy(update={"example_id": "ex-orphan", "trajectory_id": "tr-orphan"})
    passed = {v.trajectory_id: v for v in store.read_records("verdicts", run_id=RUN) if v.passed}
    rows, dropped = hf_rows([*chosen.train, orphan, chosen.train[0]], {}, passed)
    assert len(rows) == len(chosen.train)
    assert dropped == Counter({"no passing verdict for its trajectory": 1, "duplicate example id": 1})


def test_the_card_masks_a_secret_that_reached_it(monkeypatch):
    from evosyn.tasks.exports.hf_card import _masked

    monkeypatch.setenv("MY_KEY", "sk-very-secret-1234")
    cfg = {"roles": {"designer": {"api_key_env": "MY_KEY"}}}
    assert _masked("url ?key=sk-very-secret-1234", cfg) == "url ?key=***"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: a connection there is refused


def _push_args(tmp_path):
    return ("export", "--run", RUN, "--format", "hf", "--output", str(tmp_path / "ds"), "--push-to-hub", "me/evosyn")


def _no_token(tmp_path):
    return {"HF_TOKEN": None, "HUGGING_FACE_HUB_TOKEN": None, "HF_HOME": str(tmp_path / "hf")}  # no saved login


def test_push_to_hub_without_a_token_is_one_line(home, tmp_path):
    out = evosyn(*_push_args(tmp_path), home=home, env=_no_token(tmp_path))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert out.stderr.startswith("error: --push-to-hub me/evosyn: no Hugging Face token: set HF_TOKEN")
    assert (tmp_path / "ds" / "README.md").exists() and "exported" in out.stdout  # the export itself is done
    out = evosyn("export", "--run", RUN, "--format", "openai", "--output", str(tmp_path / "o"),
                 "--push-to-hub", "me/x", home=home)
    assert out.returncode == 2 and out.stderr == "error: --push-to-hub me/x: only with --format hf\n"


def test_push_to_hub_without_network_is_one_line_without_the_token(home, tmp_path):
    args = _push_args(tmp_path)
    token = "hf_fakeTokenThatMustNeverBePrinted"
    offline = {**_no_token(tmp_path), "HF_TOKEN": token, "HF_HUB_OFFLINE": None,
               "HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}"}
    out = evosyn(*args, home=home, env=offline)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("error: --push-to-hub me/evosyn: no network: cannot reach http://127.0.0.1:")
    assert token not in out.stdout + out.stderr

    out = evosyn(*args, home=home, env={**offline, "HF_HUB_OFFLINE": "1"})  # the user's own offline mode
    assert out.returncode == 2 and "offline mode: HF_HUB_OFFLINE" in out.stderr and token not in out.stderr


def test_a_closed_loop_runs_card_has_its_config_without_store_paths(home, tmp_path):
    import shutil

    from evosyn.config import RunConfig, StoreConfig
    from evosyn.storage.records import Run

    copy = tmp_path / "h"  # the module's store, plus a `runs` row as `evosyn run` writes one
    shutil.copytree(home, copy)
    cfg = RunConfig(domain="telecom", rounds=2, budget=40, seed=3,
                    store=StoreConfig(root="/secret/place", tracking_uri="postgresql://u:pw@db/mlflow"))
    store = Store(copy)
    store.write([Run(run_id=RUN, round=0, domain="telecom", arm="no_feedback", seed=3, rounds=2, budget=40,
                     config_json=cfg.model_dump_json(), status="failed")], "run")
    res = write_hf(store, RUN, select_examples(store, RUN), tmp_path / "ds")
    meta, body = card(tmp_path / "ds")
    assert "/secret/place" not in body and "pw@db" not in body and '"store"' not in body
    assert '"rounds": 2' in body and "| arm | no_feedback |" in body and "0 done of 2 asked, status failed" in body
    assert meta["dataset_info"]["splits"][0]["num_examples"] == res.rows
