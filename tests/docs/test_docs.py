"""The docs site: it builds strictly, its generated references cover the code, its worked domain pack runs, and
every query of its SQL cookbook runs against a real store and returns rows."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from html import unescape
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tests.prefect_home import PREFECT_HOME

SHARED_PREFECT_API = True  # its runs talk to one Prefect server (tests/prefect_server.py)

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
EXAMPLES = DOCS / "examples"


def load_hook():
    spec = importlib.util.spec_from_file_location("docs_reference_hook", DOCS / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def page_text(site: Path, page: str) -> str:
    html = (site / page / "index.html").read_text()
    return unescape(re.sub(r"<[^>]+>", " ", html))


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # the theme's end-of-life banner, not a build problem
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


# ------------------------------------------------------------------ generated references
def command_paths(group: click.Group, prefix: str = "evosyn") -> list[tuple[str, click.Command]]:
    out = []
    ctx = click.Context(group)  # list_commands / get_command: the root also lists its entry-point groups (bench)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        path = f"{prefix} {name}"
        out.append((path, cmd))
        if isinstance(cmd, click.Group):
            out += command_paths(cmd, path)
    return out


def test_the_cli_reference_has_every_command_and_option(site):
    hook = load_hook()
    hook.attach_cli()  # what the console script imports: every command module attaches to the root group
    from evosyn.flows.cli_app import main

    text = page_text(site, "reference/cli")
    paths = command_paths(main)
    assert len(paths) > 30 and any(p == "evosyn bench learning" for p, _ in paths)
    missing = [p for p, _ in paths if p not in text]
    assert not missing, missing
    options = {o for _, cmd in paths for p in cmd.params if isinstance(p, click.Option) for o in p.opts
               if o.startswith("--")}
    assert "--budget" in options and not [o for o in sorted(options) if o not in text]
    assert "[default: 300" in text and "Sentinel" not in text  # defaults as `--help` prints them


def config_models() -> list[type]:
    """``RunConfig`` and every model it nests (a section, a role), in the order the page lists them."""
    import typing

    from pydantic import BaseModel

    from evosyn.config import RunConfig

    def nested(annotation) -> list[type]:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return [annotation]
        return [m for a in typing.get_args(annotation) for m in nested(a)]

    models, queue = [], [RunConfig]
    while queue:
        model = queue.pop(0)
        models.append(model)
        queue += [m for info in model.model_fields.values() for m in nested(info.annotation)
                  if m not in models and m not in queue]
    return models


def undocumented(models) -> list[str]:
    return [f"{m.__name__}.{name}" for m in models for name, info in m.model_fields.items()
            if not (info.description or "").strip()]


def test_every_config_field_says_what_it_is():
    """Each field of the run config, and each environment override, carries its own ``Field(description=...)``:
    the reference page is generated from them, so a field without one would be a row that says nothing."""
    from evosyn.config import EnvOverrides

    models = config_models()
    assert {m.__name__ for m in models} >= {"RunConfig", "RoleConfig", "LlamaFactoryConfig", "OfficialEvalConfig",
                                           "GeneratorPrior", "StoreConfig", "DedupConfig"}
    assert undocumented([*models, EnvOverrides]) == []


def test_the_description_check_sees_a_field_without_one():
    from pydantic import BaseModel, Field

    class Section(BaseModel):
        told: int = Field(default=1, description="a field that says what it is")
        untold: int = 2

    assert undocumented([Section]) == ["Section.untold"]


def test_the_config_reference_has_every_field_of_every_model(site):
    from evosyn.config import ENV_OVERRIDES

    text = page_text(site, "reference/config")
    for model in config_models():
        section = text.split(model.__name__, 1)[1]  # each model's table comes after its heading
        assert not [f for f in model.model_fields if f not in section], model.__name__
    assert all(var in text for var in ENV_OVERRIDES)


def test_the_config_page_is_the_models_json_schema():
    """Types, choices, defaults (a section's too), bounds and each field's description reach its row."""
    from evosyn.config import RunConfig

    text = load_hook().render_config()
    rows = {line.split(" | ")[0].strip("| `"): line for line in text.splitlines() if line.startswith("| `")}
    assert RunConfig.model_fields["test_size"].description in rows["test_size"]
    assert "`300`" in rows["test_size"] and ">= `1`, <= `10000`" in rows["test_size"]
    assert '`"evosyn"` \\| `"static"`' in rows["arm"]  # the Literal's choices, from the schema's enum
    assert "(its defaults)" in rows["dedup"] and "`{}`" in rows["roles"]  # default factories
    assert "> `0.0`, <= `1.0`" in rows["threshold"] and "int \\| null" in rows["max_tasks"]
    assert "| `EVOSYN_ROUNDS` | `rounds` |" in text and "case-sensitive" in text
    assert "Used at: `roles.<role>`, `official_eval.user`." in text


def test_the_tables_reference_has_every_table_and_column(site):
    from evosyn.storage.arrow import schema_of
    from evosyn.storage.records import TABLES

    text = page_text(site, "reference/tables")
    for table, model in TABLES.items():
        section = text.split(f"evosyn.storage.records.{model.__name__}", 1)[1]
        missing = [f.name for f in schema_of(model) if f.name not in section]
        assert not missing, (table, missing)
    assert "observed_num_write" in text and "JSON text" in text


def test_the_metrics_reference_has_every_metric(site):
    from evosyn.tasks.reports.legend import METRICS

    text = page_text(site, "reference/metrics")
    assert not [name for name in METRICS if name not in text]


def test_every_table_says_what_a_row_is():
    """The tables page reads each record's docstring (and its fields' descriptions): no table without one."""
    from evosyn.storage.records import TABLES

    hook = load_hook()
    assert [t for t, model in TABLES.items() if not hook.own_doc(model)] == []
    assert "the Designer direction the row descends from" in hook.render_tables()  # a lineage column's description


# ------------------------------------------------------------------ the worked domain pack
@pytest.fixture
def library(monkeypatch):
    """The example pack registered as a user would (importing its package), in a registry copy undone after."""
    from evosyn.envs import packs

    packs.known()  # the built-in packs are loaded before the copy
    monkeypatch.setattr(packs, "_PACKS", dict(packs._PACKS))
    monkeypatch.setattr(packs, "_INSTANCES", dict(packs._INSTANCES))
    monkeypatch.syspath_prepend(str(EXAMPLES))
    for name in [m for m in sys.modules if m == "library" or m.startswith("library.")]:
        monkeypatch.delitem(sys.modules, name)
    importlib.import_module("library")
    return packs.get_pack("library")


def invoke(home: Path, *args: str) -> str:
    from evosyn.flows.cli import main

    result = CliRunner().invoke(main, ["--home", str(home), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_library_pack_registers_with_an_environment_and_a_generator(library):
    from evosyn.envs.packs import known

    assert "library" in known(with_environment=True)
    assert library.has_environment and library.has_generator
    assert set(library.controllable) == {"num_write", "num_read"}
    assert library.initial_space()["domain"] == "library"


def test_the_library_benchmark_tasks_pass_the_verifier(library, tmp_path):
    out = invoke(tmp_path, "verify", "--domain", "library", "--official")
    assert re.search(r"passed\W+6\b", out) and re.search(r"failed\W+0\b", out), out


def test_a_synthesis_pass_on_the_library_keeps_verified_tasks_of_every_kind(library, tmp_path):
    from evosyn.storage.store import Store

    invoke(tmp_path, "synth", "--domain", "library", "--n", "30", "--seed", "0", "--quiet")
    store = Store(tmp_path, create=False)
    verdicts = store.read_records("verdicts", run_id="synth-library-s0-n30")
    tasks = {t.task_id: t for t in store.read_records("tasks", run_id="synth-library-s0-n30")}
    assert len(verdicts) == 30 and all(v.passed for v in verdicts)
    assert {v.observed["task_family"][0] for v in verdicts} == {"borrow_book", "return_book"}
    assert {v.observed["expected_outcome"][0] for v in verdicts} == {"fulfill", "refuse"}
    for v in verdicts:  # what the verifier observed on the replay is what the blueprint asked for
        task = tasks[v.task_id]
        assert v.observed["task_family"] == task.requested["task_family"], v.task_id
    gold = [a["name"] for t in tasks.values() for a in t.tau2_task["evaluation_criteria"]["actions"]]
    assert {"borrow_book", "return_book", "get_member_details"} <= set(gold)
    assert store.read_records("sft_examples", run_id="synth-library-s0-n30")


# ------------------------------------------------------------------ a closed-loop run, and the SQL cookbook on it
RUN_CONFIG = "domain: library\nrounds: 2\nbudget: 24\nseed: 0\ntest_size: 20\nchunk_size: 12\n"
REGISTER_AND_RUN = ("import sys; sys.path.insert(0, sys.argv[1]); import library; from flows.cli import run; "
                    "sys.argv = ['evosyn', *sys.argv[2:]]; run()")


@pytest.fixture(scope="module")
def loop_home(tmp_path_factory):
    """Two closed-loop rounds on the library pack through the real CLI, in a process that registered the pack."""
    home = tmp_path_factory.mktemp("library-home")
    cfg = home / "run.yaml"
    cfg.write_text(RUN_CONFIG)
    env = {**os.environ, "EVOSYN_HOME": str(home), "PREFECT_HOME": PREFECT_HOME,
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300"}
    done = subprocess.run([sys.executable, "-c", REGISTER_AND_RUN, str(EXAMPLES), "run", "--config", str(cfg),
                           "--quiet"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return home


@pytest.mark.slow
def test_a_closed_loop_run_on_the_library_trains_evaluates_and_reflects(loop_home):
    from evosyn.storage.store import Store

    store = Store(loop_home, create=False)
    (run,) = [r for r in store.read_records("runs") if r.domain == "library" and not r.run_id.startswith("testset-")]
    assert run.status == "finished"
    evaluations = store.read_records("evaluations", run_id=run.run_id)
    assert {(e.round, e.task_set) for e in evaluations} >= {(r, s) for r in (1, 2) for s in ("test", "test_uniform")}
    assert any(e.success for e in evaluations) and not all(e.success for e in evaluations)
    assert len(store.read_records("reflections", run_id=run.run_id)) == 2


def cookbook() -> list[str]:
    text = (DOCS / "guides" / "querying.md").read_text()
    return re.findall(r"```sql\n(.*?)```", text, flags=re.DOTALL)


def test_the_cookbook_has_queries():
    queries = cookbook()
    # each pasted as it is into `evosyn query "…"`: a leading comment would read as an option
    assert len(queries) >= 10 and all(q.strip().lower().startswith("select") for q in queries)


@pytest.mark.slow
@pytest.mark.parametrize("n", range(len(cookbook())))
def test_every_cookbook_query_runs_and_returns_rows(loop_home, n):
    sql = cookbook()[n]
    out = invoke(loop_home, "query", sql, "--format", "json")
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    if "from llm_calls" in sql:  # an embedded run makes no model call
        assert rows == []
        return
    assert rows, sql
    if "from evaluations" in sql and "success" in rows[0]:
        assert all(0.0 <= r["success"] <= 1.0 for r in rows)


# ------------------------------------------------------------------ the README
README = ROOT / "README.md"


def test_the_readme_is_a_guide_not_a_notebook():
    text = README.read_text()
    assert len(text.splitlines()) <= 300
    hashes = [w for w in re.findall(r"\b[0-9a-f]{7,40}\b", text) if re.search("[a-f]", w) and re.search("[0-9]", w)]
    assert not hashes, hashes
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text.replace("docs/research/", ""))  # no dated notes


def test_the_readme_links_point_at_files():
    missing = []
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text()):
        if target.startswith(("http://", "https://")):
            continue
        if not (ROOT / target).exists() and target not in PENDING:
            missing.append(target)
    assert not missing, missing


def test_ci_runs_the_readmes_test_command_verbatim():
    readme = [line for line in README.read_text().splitlines() if line.startswith('pip install -e ".[dev]" && ')]
    ci = (ROOT / ".ci" / "run").read_text().split("# --- the README's test command, verbatim ---\n", 1)[1]
    assert len(readme) == 1 and "mkdocs build --strict" in readme[0]
    assert ci.strip().splitlines()[0] == readme[0]


# ------------------------------------------------------------------ paths the docs name
PENDING: set[str] = set()  # paths the docs may name before they exist
# a path under these is the repository's; others (`spaces/space_v1.json`) are a run's files
TOP = ("storage", "config", "envs", "agents", "domains", "tasks", "flows", "benchmarks", "deployments", "docker",
       "tests", "docs", "requirements")


def test_every_path_the_docs_name_exists():
    """A moved or renamed module fails here, so the docs never send a reader to a file that is gone."""
    missing = []
    for page in [README, *sorted(DOCS.rglob("*.md"))]:
        for path in re.findall(r"`([\w./-]+/[\w.*-]+\.(?:py|yaml|yml|json|md|sh|txt|toml))`", page.read_text()):
            if path.split("/")[0] in TOP and path not in PENDING and not list(ROOT.glob(path)):
                missing.append(f"{page.relative_to(ROOT)}: {path}")
    layout = (DOCS / "reference" / "layout.md").read_text()
    for package, row in re.findall(r"^\| `([\w/]+)/` \|(.*)$", layout, flags=re.MULTILINE):
        for name in re.findall(r"`([\w*]+\.py)`", row):  # a module named bare in its package's row
            if not list((ROOT / package).glob(name)):
                missing.append(f"layout.md: {package}/{name}")
    assert not missing, missing


def test_every_run_config_the_docs_show_is_valid():
    """The YAML examples of the README and the guides load as run configs (a renamed field fails here)."""
    import textwrap

    import yaml

    from evosyn.config import validate_config

    blocks = [(page, textwrap.dedent(block)) for page in [README, *sorted((DOCS / "guides").glob("*.md"))]
              for block in re.findall(r"```yaml\n(.*?)```", page.read_text(), flags=re.DOTALL)]
    assert len(blocks) >= 5
    for page, block in blocks:
        validate_config(yaml.safe_load(block), source=f"{page.name}: {block[:40]!r}")


def test_every_command_the_readme_shows_exists():
    hook = load_hook()
    hook.attach_cli()
    from evosyn.flows.cli_app import main

    commands = dict(command_paths(main))
    shown = set()
    for words in re.findall(r"\bevosyn ((?:[a-z][a-z-]*)(?: [a-z|]+)?)", README.read_text()):  # new-domain too
        first, *rest = words.split()
        shown.add(f"evosyn {first}")
        if rest and isinstance(commands.get(f"evosyn {first}"), click.Group):  # each subcommand shown must exist
            shown |= {f"evosyn {first} {sub}" for sub in rest[0].split("|") if sub}
    known = set(commands)
    assert len(shown) > 15 and not sorted(shown - known)
