"""MkDocs hook: the reference pages read off the code at build time, so none can go stale.

Each page below holds a marker, ``<!-- generated: FUNCTION -->``, that ``on_page_markdown`` replaces:

- ``reference/config.md`` (``render_config``): every field of ``evosyn.storage.config.RunConfig`` and of the models it
  nests (type, default, bounds, and the comment the source gives the field), plus the ``EVOSYN_*`` overrides;
- ``reference/tables.md`` (``render_tables``): every store table of ``evosyn.storage.records.TABLES``, its columns as
  the Parquet files hold them (``evosyn.storage.arrow.schema_of``: the Arrow types DuckDB sees) and what each is;
- ``reference/metrics.md`` (``render_metrics``): every metric of ``tasks/legend.py``.

``reference/cli.md`` is rendered by the ``mkdocs-click`` extension from the root click group; ``on_config``
first imports the module the ``evosyn`` console script runs, so every command attached to that group is on it.
The render functions are plain functions, so ``tests/docs/test_docs.py`` checks them too.
"""
from __future__ import annotations

import importlib
import inspect
import io
import textwrap
import tokenize
import types
import typing
from importlib import metadata

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

# A page holds the marker ``<!-- generated: FUNCTION -->``; at build time the marker becomes FUNCTION's output, so
# the page file exists (links to it resolve anywhere) and its content is always the code's.
GENERATED = ("render_config", "render_tables", "render_metrics")
MARKER = "<!-- generated: {} -->"

# What a field is, for the fields whose source gives no comment or description. The source's own text wins;
# tests/docs/test_docs.py checks that every name here is still a field, so a renamed field fails the build's test.
FIELD_NOTES = {
    "RunConfig.arm": "which arm runs: `evosyn` (Reflector with learner evidence, Designer steered by feedback), "
                     "`static` (the initial space, frozen), `no_feedback` (Reflector without learner evidence, "
                     "App. B.6), `no_reflector`, `no_designer`, `single_agent` (Concepts: arms)",
    "RunConfig.backend": "`llm`: the roles named under `roles:` run on their model; every other role stays embedded",
    "RunConfig.rounds": "closed-loop rounds (a reflecting arm may stop early, `stop_after_static_rounds`)",
    "RunConfig.budget": "blueprints synthesized per round",
    "RunConfig.seed": "the seed of every random choice of the run (same config and seed: same rows)",
    "RunConfig.learner": "`embedded`: behaviour cloning with scikit-learn, in-process; `llamafactory`: a real "
                         "checkpoint trained each round (see `llamafactory`)",
    "RunConfig.chunk_size": "blueprints per chunk of generate / rollout / verify (one Prefect task each)",
    "RunConfig.concurrency": "chunks of a stage run at once",
    "RunConfig.store": "where the run's store is, and where MLflow logs",
    "RunConfig.env_data": "domain -> the folder its environment reads its data from instead of its default, e.g. "
                          "`{car_bench: /data/car-bench-data}` (a snapshot of CAR-bench's dataset; CAR-bench "
                          "guide); a pack that reads no data folder, or a folder not in its layout, is one `error:` "
                          "line before any work",
    "RunConfig.roles": "role -> its model (LLM backends guide); a role not named here stays embedded",
    "StoreConfig.root": "the store root (else `EVOSYN_HOME`, else `./.evosyn`)",
    "StoreConfig.tracking_uri": "an MLflow tracking URI (else the store's own `mlflow.db`)",
    "RoleConfig.backend": "`llm` to run this role on a model (also implied by `backend: llm` at the top level)",
    "RoleConfig.provider": "`openai` (structured outputs), `anthropic` (messages API, JSON through a forced tool), "
                           "`openai_compatible` (vLLM, `llamafactory-cli api`, llama.cpp, by `base_url`)",
    "RoleConfig.model": "the provider's model name",
    "RoleConfig.base_url": "an http(s) URL with a host, without credentials (`openai_compatible`)",
    "RoleConfig.api_key_env": "the environment variable (or `.env` entry) holding the key: the key itself is "
                              "never in a config",
    "RoleConfig.temperature": "sampling temperature (part of the reply cache's key)",
    "RoleConfig.max_tokens": "the reply's token limit",
    "RoleConfig.max_concurrency": "requests in flight at once for this model",
    "RoleConfig.rpm": "requests per minute this role may send",
    "RoleConfig.tpm": "tokens per minute this role may send",
    "RoleConfig.max_invalid_retries": "times an invalid reply is asked again, with the problem shown to the model, "
                                      "before it is recorded as a rejection",
    "OfficialEvalConfig.max_steps": "agent replies per task and trial",
    "LlamaFactoryConfig.train_timeout_s": "seconds one round's `llamafactory-cli train` may take",
    "Record.run_id": "the run (or synthesis pass, or test set) the row belongs to",
    "Record.round": "the round (0: before the first round, e.g. a test set's build)",
    "Record.space_version": "the version of the synthesis space the row was made under",
    "Record.direction_id": "the Designer direction the row descends from",
    "Record.blueprint_id": "the Planner blueprint the row descends from",
    "Verdict.reward": "tau2's reward basis on the replay (1.0 or 0.0)",
    "Verdict.passed": "every check passed: the trajectory is kept",
    "Verdict.checks": "each check (`executable`, `replay`, `state`, `actions`, `communicate`, `policy`, "
                      "`factors`) with `passed`, `skipped` and its `reason`",
    "Verdict.observed": "the factors observed on the replay: factor -> values",
    "Evaluation.success": "the evaluated agent solved the task (every check of the verifier)",
    "Evaluation.failed_checks": "the checks that failed",
    "GeneratorPrior.suppress": "property -> {bucket: keep probability}: a planted gap (see above)",
}


# What a row of a table is, for the records without a docstring (checked like FIELD_NOTES).
TABLE_NOTES = {
    "runs": "One row per closed-loop run (`evosyn run`, each run of a sweep): its config and status (`running`, "
            "`finished`, `failed`). Synthesis passes and the fixed test sets have run ids too, in the other tables.",
    "trajectories": "One conversation: the teacher's rollout, a repair, the learner's or a served agent's "
                    "episode on an evaluated task, with every tool call and result.",
    "verdicts": "The verifier's decision on one trajectory of one task: every check with its reason, the reward, "
                "and the factors observed on the replay.",
    "sft_examples": "A verified trajectory as a training example (`train`) or held out (`diagnostic`), with "
                    "the tool schemas.",
    "evaluations": "One evaluated task (and trial) of a learner on a task set: `diagnostic`, `test` "
                   "(official-matched), `test_uniform`, `probe`, `official:<split>`.",
    "feedback": "What the learner's evaluation says to the next round's Designer: success and coverage per slice.",
    "probes": "One diagnostic probe of a round: failure and coverage per bucket, CMI, permutation p-value, NMI.",
}


# ------------------------------------------------------------------ field comments
def field_comments(model: type[BaseModel]) -> dict[str, str]:
    """Field name -> the comment the class source gives it: the comment lines right above the field, then the
    comment at the end of its line. The models keep their explanations as comments (not ``description=``), so
    the page reads them where the code keeps them."""
    source = textwrap.dedent(inspect.getsource(model))
    found: dict[str, str] = {}
    pending: list[str] = []  # comment lines seen since the last statement
    line_of: dict[int, str] = {}  # line -> the field a statement at class level starts there
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    depth = 0
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.INDENT:
            depth += 1
        elif tok.type == tokenize.DEDENT:
            depth -= 1
        elif tok.type == tokenize.COMMENT and depth <= 1 and tok.start[1] > 0:  # the class body (its first
            # comments come before the INDENT token)
            text = tok.string.lstrip("#").strip()
            if text.startswith(("type:", "noqa")):  # a linter's note, not an explanation
                continue
            row = tok.start[0]
            if row in line_of:  # a trailing comment
                name = line_of[row]
                found[name] = " ".join(x for x in (found.get(name, ""), text) if x)
            else:
                pending.append(text)
        elif tok.type == tokenize.NAME and depth == 1 and i + 1 < len(tokens) and tokens[i + 1].string == ":" \
                and tokens[i - 1].type in (tokenize.INDENT, tokenize.NEWLINE, tokenize.NL, tokenize.DEDENT) \
                and tok.string in model.model_fields:
            line_of[tok.start[0]] = tok.string
            if pending:
                found[tok.string] = " ".join(pending)
            pending = []
        elif tok.type == tokenize.NEWLINE:  # a statement ended: comments above it were its own
            pending = []
    return found


# ------------------------------------------------------------------ types and defaults
def type_name(annotation: typing.Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(f"`{a!r}`".replace("'", '"') for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is not None:
        inner = ", ".join(type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if annotation is type(None):
        return "null"
    return getattr(annotation, "__name__", str(annotation))


def default_text(info: FieldInfo) -> str:
    if info.default is not PydanticUndefined:
        value = info.default
    elif info.default_factory is not None:
        value = info.default_factory()
        if isinstance(value, BaseModel):
            return "(its defaults)"
    else:
        return "required"
    if value is None:
        return "`null`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def bounds(info: FieldInfo) -> str:
    parts = []
    for item in info.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"), ("pattern", "matches")):
            value = getattr(item, attr, None)
            if value is not None:
                parts.append(f"{sign} `{value}`")
    return ", ".join(parts)


def _cell(text: str) -> str:
    return markdown(text).replace("|", "\\|").replace("\n", " ")


def markdown(text: str) -> str:
    """Docstrings and comments quote code RST-style (double backticks); Markdown wants one."""
    return text.replace("``", "`")


def own_doc(model: type) -> str:
    """The class's own docstring (``inspect.getdoc`` would hand a model without one pydantic's)."""
    doc = model.__dict__.get("__doc__")
    return markdown(inspect.cleandoc(doc)) if doc else ""


def nested_models(annotation: typing.Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in nested_models(a)]


def model_table(model: type[BaseModel], prefix: str) -> list[str]:
    comments = field_comments(model)
    comments.update({k.split(".", 1)[1]: v for k, v in FIELD_NOTES.items()
                     if k.split(".", 1)[0] == model.__name__ and k.split(".", 1)[1] not in comments})
    lines = ["| field | type | default | bounds | what it is |", "| --- | --- | --- | --- | --- |"]
    for name, info in model.model_fields.items():
        what = info.description or comments.get(name, "")
        lines.append(f"| `{prefix}{name}` | {_cell(type_name(info.annotation))} | {default_text(info)} | "
                     f"{bounds(info)} | {_cell(what)} |")
    return lines


def render_config() -> str:
    from evosyn.storage.config import ENV_OVERRIDES, ROLES, RunConfig

    intro = ("Every field of `RunConfig` and of the models it nests, read by `docs/hooks/reference.py`. A run "
             "config is a YAML file of these fields; an unknown field, a value out of bounds or a wrong type is one "
             "`error:` line and exit code 2 before any work (`evosyn config validate FILE` prints the resolved "
             "settings).")
    precedence = "Precedence: the file, then the `EVOSYN_*` environment variables below, then the command's flags."
    out = [intro, "", precedence, ""]
    used_at: dict[type[BaseModel], list[str]] = {RunConfig: []}  # model -> where the config nests it, in order
    queue: list[tuple[type[BaseModel], str]] = [(RunConfig, "")]
    while queue:
        model, path = queue.pop(0)
        for name, info in model.model_fields.items():
            for sub in nested_models(info.annotation):
                where = f"{path}.{name}" if path else name
                where += ".<role>" if name == "roles" else ""
                if sub not in used_at:
                    used_at[sub] = []
                    queue.append((sub, where))
                used_at[sub].append(where)
    for model, paths in used_at.items():
        title = "RunConfig (the top level)" if model is RunConfig else model.__name__
        out += [f"## {title}", ""]
        doc = own_doc(model)
        if doc and model is not RunConfig:
            out += [doc, ""]
        if paths:
            out += ["Used at: " + ", ".join(f"`{p}`" for p in paths) + ".", ""]
        out += model_table(model, "") + [""]
    out += ["## Roles", "", "Keys of `roles:` (each a RoleConfig): " + ", ".join(f"`{r}`" for r in ROLES) + ".", "",
            "## Environment overrides", "", "| variable | field |", "| --- | --- |"]
    out += [f"| `{var}` | `{field}` |" for var, field in ENV_OVERRIDES.items()]
    out += ["", "`EVOSYN_HOME` names the store root when `store.root` is not set (default `./.evosyn`).", ""]
    return "\n".join(out)


# ------------------------------------------------------------------ tables
def render_tables() -> str:
    from evosyn.storage.arrow import schema_of
    from evosyn.storage.records import TABLES

    intro = ("Each record class is one table: Parquet files under `tables/<table>/run_id=…/round=…/`, one DuckDB "
             "view per table in `evosyn query` and in `catalog.duckdb`. Column types are the Arrow types the files "
             "hold: nested values (sub-models, dicts, lists of sub-models) are JSON text (read them with DuckDB's "
             "`->>` or `from_json`), and each observed factor is stored once more as a typed `list<string>` column "
             "of its own, `observed_<factor>` (record type `derived`), e.g. `observed_num_write[1]`.")
    lineage = ("Every table has the lineage columns `run_id`, `round`, `space_version`, `direction_id`, "
               "`blueprint_id`, so any row traces back to the decision that made it.")
    out = [intro, "", lineage, ""]
    out += ["| table | record | what a row is |", "| --- | --- | --- |"]
    for table, model in TABLES.items():
        first = (own_doc(model) or TABLE_NOTES.get(table, "")).split("\n\n")[0].replace("\n", " ")
        out.append(f"| [`{table}`](#{table}) | `{model.__name__}` | {_cell(first)} |")
    out.append("")
    for table, model in TABLES.items():
        comments = {}
        for klass in reversed(model.__mro__):
            if isinstance(klass, type) and issubclass(klass, BaseModel) and klass is not BaseModel:
                comments.update({k.split(".", 1)[1]: v for k, v in FIELD_NOTES.items()
                                 if k.split(".", 1)[0] == klass.__name__})
                comments.update(field_comments(klass))
        out += [f"## {table}", "", f"Record: `evosyn.storage.records.{model.__name__}`.", ""]
        doc = own_doc(model) or TABLE_NOTES.get(table, "")
        if doc:
            out += [doc, ""]
        out += ["| column | Arrow type | record type | what it is |", "| --- | --- | --- | --- |"]
        for field in schema_of(model):
            meta = field.metadata or {}
            kind = "json" if meta.get(b"json") else "derived" if meta.get(b"derived") else ""
            info = model.model_fields.get(field.name)
            what = (info.description if info is not None else None) or comments.get(field.name, "")
            if kind == "derived":
                what = f"`{meta[b'derived'].decode()}[\"{field.name.split('_', 1)[1]}\"]` as a typed column"
            record_type = "derived" if info is None else _cell(type_name(info.annotation))
            arrow = f"`{field.type}`" + (" (JSON text)" if kind == "json" else "")
            out.append(f"| `{field.name}` | {arrow} | {record_type} | {_cell(what)} |")
        out.append("")
    return "\n".join(out)


# ------------------------------------------------------------------ metrics
METRICS_INTRO = """`evosyn report RUN` writes `reports/RUN/report.html`, one page with no external resource (inline CSS, plots as
embedded PNG): the per-round table; test and diagnostic success over rounds with 95% Wilson intervals (per arm,
seeds pooled, with `--compare RUN ...`); test success per slice (task family, outcome, writes, reads); the
Designer's allocation per round by factor value; the diagnostic failure rate per probe bucket per round; the
evolution of the space (versions and diffs; an update after the last round is marked as proposed for a round that
did not run); two verified samples per task family rendered as a chat; and this legend. `summary.md` holds the same
tables. `evosyn compare RUN ...` prints the learner and the data metrics as two tables with the legend under them
(`compare.json` carries it as `legend`).

The intrinsic metrics (factor coverage, factor balance, interaction coverage, trajectory diversity) use only
verified examples, with every factor re-derived from the realized tool actions (never the plan), against fixed
per-domain reference sets. `trajectory_diversity` is normalized by the patterns the run has verified so far;
`trajectory_diversity_union` by the union over every compared run of the domain, and only it is comparable
across runs.

Every report, table and JSON uses the names and labels below (`tasks/legend.py`).
"""


def render_metrics() -> str:
    from evosyn.tasks.legend import METRICS

    out = [METRICS_INTRO, "| name | shown as | what it measures | range | better |", "| --- | --- | --- | --- | --- |"]
    out += [f"| `{name}` | {_cell(m.label)} | {_cell(m.means)} | {_cell(m.range)} | {_cell(m.better)} |"
            for name, m in METRICS.items()]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ MkDocs events
def attach_cli() -> None:
    """Import the module the ``evosyn`` console script runs, so every command is attached to the root group."""
    (entry,) = [ep for ep in metadata.entry_points(group="console_scripts") if ep.name == "evosyn"]
    importlib.import_module(entry.module)
    # the root lists the groups other layers attach through entry points (`evosyn bench`) only on demand, and
    # mkdocs-click reads a group's `commands` when it has any: put every listed command there
    import click

    from evosyn.flows.cli_app import main

    ctx = click.Context(main)
    for name in main.list_commands(ctx):
        main.add_command(main.get_command(ctx, name), name)


def on_config(config):
    attach_cli()
    return config


def on_page_markdown(markdown, page, config, files):
    for name in GENERATED:
        marker = MARKER.format(name)
        if marker in markdown:
            markdown = markdown.replace(marker, globals()[name]())
    return markdown
