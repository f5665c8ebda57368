"""MkDocs hook: the reference pages read off the code at build time, so none can go stale.

Each page below holds a marker, ``<!-- generated: FUNCTION -->``, that ``on_page_markdown`` replaces:

- ``reference/config.md`` (``render_config``): every field of ``evosyn.config.RunConfig`` and of the models it nests,
  from their JSON schema (type, default, bounds, choices and the field's own description), plus the ``EVOSYN_*``
  overrides from their settings model (``evosyn.config.EnvOverrides``);
- ``reference/tables.md`` (``render_tables``): every store table of ``evosyn.storage.records.TABLES``, its columns as
  the Parquet files hold them (``evosyn.storage.arrow.schema_of``: the Arrow types DuckDB sees) and what each is
  (the record's docstring and its fields' descriptions);
- ``reference/metrics.md`` (``render_metrics``): every metric of ``tasks/reports/legend.py``.

``reference/cli.md`` is rendered by the ``mkdocs-click`` extension from the root click group; ``on_config``
first imports the module the ``evosyn`` console script runs, so every command attached to that group is on it.
The render functions are plain functions, so ``tests/docs/test_docs.py`` checks them too.
"""
from __future__ import annotations

import importlib
import json
import types
import typing
from importlib import metadata
from typing import Any

from pydantic.json_schema import GenerateJsonSchema

# A page holds the marker ``<!-- generated: FUNCTION -->``; at build time the marker becomes FUNCTION's output, so
# the page file exists (links to it resolve anywhere) and its content is always the code's.
GENERATED = ("render_config", "render_tables", "render_metrics")
MARKER = "<!-- generated: {} -->"


# ------------------------------------------------------------------ text
def _cell(text: str) -> str:
    return markdown(text).replace("|", "\\|").replace("\n", " ")


def markdown(text: str) -> str:
    """Docstrings quote code RST-style (double backticks); Markdown wants one."""
    return text.replace("``", "`")


def own_doc(model: type) -> str:
    """The class's own docstring (``inspect.getdoc`` would hand a model without one its base's)."""
    import inspect

    doc = model.__dict__.get("__doc__")
    return markdown(inspect.cleandoc(doc)) if doc else ""


# ------------------------------------------------------------------ the run config, from its JSON schema
class WithFactoryDefaults(GenerateJsonSchema):
    """The JSON schema, with the value of each ``default_factory`` as the field's default (pydantic leaves it out),
    so the page gives every field's default."""

    def get_default_value(self, schema: Any) -> Any:
        factory = schema.get("default_factory")
        if factory is not None and not schema.get("default_factory_takes_data"):
            return factory()
        return super().get_default_value(schema)


def config_schema(model: type) -> dict:
    return model.model_json_schema(schema_generator=WithFactoryDefaults)


SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "null"}
BOUNDS = (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<"),
          ("pattern", "matches"))


def ref_name(prop: dict) -> str | None:
    """The model a property is, when it is one (``$ref``, or pydantic's ``allOf`` of a single ``$ref``)."""
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[1]
    if len(prop.get("allOf", [])) == 1:
        return ref_name(prop["allOf"][0])
    return None


def schema_type(prop: dict) -> str:
    """A property's type, in Python's words: its choices where it has some, a nested model as a link to its
    section."""
    if (name := ref_name(prop)) is not None:
        return f"[{name}](#{name.lower()})"
    if "anyOf" in prop:
        return " | ".join(schema_type(p) for p in prop["anyOf"])
    if "enum" in prop:
        return " | ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    kind = prop.get("type")
    if kind == "array":
        return f"list[{schema_type(prop.get('items', {}))}]"
    if kind == "object":
        values = prop.get("additionalProperties", True)
        keys = schema_type(prop.get("propertyNames", {"type": "string"}))
        return f"dict[{keys}, {'any' if values is True else schema_type(values)}]"
    return SCALARS.get(kind, "any")


def schema_default(prop: dict) -> str:
    if "default" not in prop:
        return "required"
    if ref_name(prop) is not None or any(ref_name(p) for p in prop.get("anyOf", [])):
        if isinstance(prop["default"], dict):  # a section's default: the section with its own defaults
            return "(its defaults)"
    return f"`{json.dumps(prop['default'])}`"


def schema_bounds(prop: dict) -> str:
    """Its bounds and pattern, also those of an optional value's type (``int | None``)."""
    return ", ".join(f"{sign} `{branch[key]}`" for branch in (prop, *prop.get("anyOf", []))
                     for key, sign in BOUNDS if key in branch)


def refs_in(prop: dict, where: str) -> list[tuple[str, str]]:
    """(model, where the config nests it) of every model a property holds, a mapping's values too."""
    if (name := ref_name(prop)) is not None:
        return [(name, where)]
    found = [r for p in prop.get("anyOf", []) for r in refs_in(p, where)]
    if isinstance(prop.get("additionalProperties"), dict):  # roles: role -> its model
        found += refs_in(prop["additionalProperties"], f"{where}.<{where.rsplit('.', 1)[-1].removesuffix('s')}>")
    return found


def model_table(schema: dict) -> list[str]:
    lines = ["| field | type | default | bounds | what it is |", "| --- | --- | --- | --- | --- |"]
    for name, prop in schema["properties"].items():
        lines.append(f"| `{name}` | {_cell(schema_type(prop))} | {schema_default(prop)} | {schema_bounds(prop)} | "
                     f"{_cell(prop.get('description', ''))} |")
    return lines


def render_config() -> str:
    from evosyn.config import ENV_OVERRIDES, EnvOverrides, RunConfig

    top = config_schema(RunConfig)
    defs = top.pop("$defs", {})
    intro = ("Every field of `RunConfig` and of the models it nests, generated from their JSON schema by "
             "`docs/hooks/reference.py`. A run config is a YAML file of these fields; an unknown field, a value out "
             "of bounds or a wrong type is one `error:` line and exit code 2 before any work (`evosyn config "
             "validate FILE` prints the resolved settings).")
    precedence = ("Precedence: the file, then the `EVOSYN_*` environment variables below, then the command's flags.")
    out = [intro, "", precedence, ""]
    used_at: dict[str, list[str]] = {"RunConfig": []}  # model -> where the config nests it, in order
    queue = [("RunConfig", top, "")]
    while queue:
        _, schema, path = queue.pop(0)
        for name, prop in schema["properties"].items():
            for sub, where in refs_in(prop, f"{path}.{name}" if path else name):
                if sub not in used_at:
                    used_at[sub] = []
                    queue.append((sub, defs[sub], where))
                used_at[sub].append(where)
    for model, paths in used_at.items():
        schema = top if model == "RunConfig" else defs[model]
        out += [f"## {'RunConfig (the top level)' if model == 'RunConfig' else model}", ""]
        if schema.get("description"):
            out += [markdown(schema["description"]), ""]
        if paths:
            out += ["Used at: " + ", ".join(f"`{p}`" for p in paths) + ".", ""]
        out += model_table(schema) + [""]
    roles = top["properties"]["roles"]["propertyNames"]["enum"]
    out += ["## Roles", "", "Keys of `roles:` (each a RoleConfig): " + ", ".join(f"`{r}`" for r in roles) + ".", ""]
    env = config_schema(EnvOverrides)
    out += ["## Environment overrides", "", markdown(env.get("description", "")), "",
            "An empty variable counts as unset, and the names are case-sensitive. Each value is read as the same "
            "text would be in the file, so a bad one is refused with the same line.", "",
            "| variable | field | what it is |", "| --- | --- | --- |"]
    fields = {field: var for var, field in ENV_OVERRIDES.items()}
    out += [f"| `{fields[name.lower()]}` | `{name.lower()}` | {_cell(prop.get('description', ''))} |"
            for name, prop in env["properties"].items()]
    out += ["", "`EVOSYN_HOME` names the store root when `store.root` is not set (default `./.evosyn`).", ""]
    return "\n".join(out)


# ------------------------------------------------------------------ tables
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
        first = own_doc(model).split("\n\n")[0].replace("\n", " ")
        out.append(f"| [`{table}`](#{table}) | `{model.__name__}` | {_cell(first)} |")
    out.append("")
    for table, model in TABLES.items():
        out += [f"## {table}", "", f"Record: `evosyn.storage.records.{model.__name__}`.", ""]
        doc = own_doc(model)
        if doc:
            out += [doc, ""]
        out += ["| column | Arrow type | record type | what it is |", "| --- | --- | --- | --- |"]
        for field in schema_of(model):
            meta = field.metadata or {}
            kind = "json" if meta.get(b"json") else "derived" if meta.get(b"derived") else ""
            info = model.model_fields.get(field.name)
            what = (info.description if info is not None else None) or ""
            if kind == "derived":
                what = f"`{meta[b'derived'].decode()}[\"{field.name.split('_', 1)[1]}\"]` as a typed column"
            record_type = "derived" if info is None else _cell(type_name(info.annotation))
            arrow = f"`{field.type}`" + (" (JSON text)" if kind == "json" else "")
            out.append(f"| `{field.name}` | {arrow} | {record_type} | {_cell(what)} |")
        out.append("")
    return "\n".join(out)


# ------------------------------------------------------------------ metrics
METRICS_INTRO = """`evosyn report RUN` writes `report.html` into the store's `reports/RUN/` (`.evosyn/reports/RUN/`, or under
`$EVOSYN_HOME`; it prints the path), one page with no external resource (inline CSS, plots as embedded PNG): the per-round table; test and diagnostic success over rounds with 95% Wilson intervals (per arm,
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

Every report, table and JSON uses the names and labels below (`tasks/reports/legend.py`).
"""


def render_metrics() -> str:
    from evosyn.tasks.reports.legend import METRICS

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
