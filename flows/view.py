"""Records for the terminal with `rich`: blueprints, tasks, trajectories as chat, verdicts check by check.

Text from records (user turns, tool results, reasons) goes in as ``rich.text.Text``,
never as markup, so a ``[bracket]`` in a tool result prints as itself.
"""
from __future__ import annotations

import json
import sys
from typing import Any, Iterable

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from evosyn.envs.base import EnvTask
from evosyn.flows.compile import stored_domain
from evosyn.storage.records import Blueprint, Evaluation, Run, SFTExample, SynthTask, Trajectory, Verdict

RESULT_CHARS = 400  # a tool result longer than this is cut (``--full`` shows all of it)


def console() -> Console:
    """A console on the current stdout (a terminal's width; 120 columns into a pipe or a file)."""
    return Console(width=None if sys.stdout.isatty() else 120, highlight=False)


def _args(arguments: dict[str, Any]) -> str:
    return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())


def _cut(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


def _fields(rows: Iterable[tuple[str, Any]]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    for key, value in rows:
        if value in (None, "", [], {}):
            continue
        if isinstance(value, dict):
            value = "; ".join(f"{k}: {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in value.items())
        elif isinstance(value, list):
            value = ", ".join(map(str, value))
        grid.add_row(key, Text(str(value)))
    return grid


def _where(rec) -> Text:
    return Text(f"run {rec.run_id} · round {rec.round} · space v{rec.space_version}")


# ---------------------------------------------------------------- one renderable per kind
def blueprint_view(bp: Blueprint) -> Panel:
    c = bp.expected_difficulty_controls
    body = _fields([
        ("intent", bp.generation_intent),
        ("dimensions", {k: v for k, v in bp.selected_dimensions.items() if v}),
        ("success focus", bp.success_focus),
        ("difficulty", f"{c.expected_tool_calls} tool calls, {c.num_policy_constraints} policy constraints, "
                       f"{c.num_entities} entities" + ("; needs clarification" if c.requires_clarification else "")
         + ("; user makes a false claim" if c.allows_user_false_claim else "")
         + ("; changes state" if c.requires_state_change else "; no state change")),
        ("notes", bp.diversity_notes),
        ("direction", bp.direction_id),
    ])
    return Panel(body, title=Text(f"blueprint {bp.blueprint_id}"), subtitle=Text(f"{bp.domain} · ") + _where(bp),
                 title_align="left", border_style="magenta")


def _env_task(task: SynthTask) -> EnvTask:
    return stored_domain(task.domain).task_from_json(task.definition)


def instruction(task: SynthTask) -> dict[str, str]:
    """The user's side of a task: what the simulated user wants, knows, does not know, and how to behave."""
    return _env_task(task).scenario.parts()


def task_view(task: SynthTask) -> Panel:
    env_task = _env_task(task)
    actions = env_task.gold_actions
    expected = Text()
    for i, a in enumerate(actions, 1):
        who = "user device: " if a.requestor == "user" else ""
        expected.append(f"{i:>2}. {who}{a.name}({_args(a.arguments)})\n")
    parts: list[RenderableType] = [_fields([
        ("purpose", env_task.purpose),
        *instruction(task).items(),
        ("requested", {k: v for k, v in task.requested.items() if v}),
        ("setup", [f"{side}: {name}({_args(args)})" for side, name, args in env_task.setup]),
        ("communicate", env_task.communicate_info),
        ("source", f"{task.source}, generator {task.generator}, blueprint {task.blueprint_id}"),
    ])]
    if actions:
        parts += [Text(f"expected actions ({len(actions)})", style="bold"), expected]
    return Panel(Group(*parts), title=Text(f"task {task.task_id}"),
                 subtitle=Text(f"{task.domain} · ") + _where(task),
                 title_align="left", border_style="blue")


def chat(trajectory: Trajectory, limit: int | None = RESULT_CHARS) -> Table:
    """The conversation: user and assistant turns, each tool call with its arguments, each result.

    Two columns (who, what), so a long turn or tool result wraps under its own text.
    """
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    for m in trajectory.messages:
        if m.role == "system":
            grid.add_row(Text("system", style="bold dim"), Text(_cut(m.content or "", limit), style="dim"))
            continue
        if m.role == "tool":
            side = "device" if m.requestor == "user" else "tool"
            label = f"  ← {side}" + (" error" if m.error else "")
            grid.add_row(Text(label, style="bold red" if m.error else "dim bold"),
                         Text(_cut(m.content or "", limit), style="red" if m.error else "dim"))
            continue
        style = "bold cyan" if m.role == "user" else "bold green"
        if m.content:
            grid.add_row(Text(m.role, style=style), Text(m.content))
        for call in m.tool_calls:
            grid.add_row(Text(f"  {m.role} →", style=style),
                         Text.assemble((call.name, "bold yellow"), f"({_args(call.arguments)})"))
    return grid


def trajectory_view(t: Trajectory, limit: int | None = RESULT_CHARS) -> Panel:
    calls = sum(len(m.tool_calls) for m in t.messages)
    head = (f"{t.producer}{' ' + t.model_version if t.model_version else ''} · attempt {t.attempt} · "
            f"{len(t.messages)} messages, {calls} tool calls · ended by {t.termination} · task {t.task_id}")
    return Panel(Group(Text(head, style="dim"), chat(t, limit)), title=Text(f"trajectory {t.trajectory_id}"),
                 subtitle=_where(t), title_align="left", border_style="green")


def checks_table(v: Verdict) -> Table:
    table = Table(show_header=True, header_style="bold", expand=False)
    for col in ("check", "result", "reason"):
        table.add_column(col)
    for c in v.checks:
        result = Text("skipped", style="dim") if c.skipped else \
            Text("pass", style="green") if c.passed else Text("FAIL", style="bold red")
        table.add_row(Text(c.name), result, Text(c.reason))
    return table


def verdict_view(v: Verdict, benchmark: str = "") -> Panel:
    """A verdict check by check. Its reward is named only beside the benchmark whose rule it is (``benchmark``,
    ``Domain.benchmark``): a domain of one's own has no benchmark, and its verdict is its checks."""
    outcome = Text("PASSED" if v.passed else "REJECTED", style="bold green" if v.passed else "bold red")
    failed = ", ".join(c.name for c in v.failed())
    reward = f" · {benchmark} reward {v.reward:g}" if benchmark else ""
    head = Text.assemble(outcome, f"{reward} · attempt {v.attempt}", f" · failed: {failed}" if failed else "")
    parts: list[RenderableType] = [head, checks_table(v)]
    extra = _fields([("observed", {k: x for k, x in v.observed.items() if x}), ("repaired", v.repair_reason),
                     ("trajectory", v.trajectory_id), ("task", v.task_id)])
    parts.append(extra)
    return Panel(Group(*parts), title=Text(f"verdict {v.verdict_id}"), subtitle=_where(v), title_align="left",
                 border_style="green" if v.passed else "red")


def run_view(run: Run) -> Panel:
    return Panel(_fields([("domain", run.domain), ("arm", run.arm), ("backend", run.backend), ("seed", run.seed),
                          ("rounds", run.rounds), ("budget", run.budget), ("status", run.status),
                          ("created", run.created_at.isoformat())]),
                 title=Text(f"run {run.run_id}"), title_align="left", border_style="white")


def example_view(e: SFTExample) -> Panel:
    return Panel(_fields([("split", e.split), ("messages", len(e.messages)), ("tools", len(e.tools)),
                          ("trajectory", e.trajectory_id), ("task", e.task_id)]),
                 title=Text(f"training example {e.example_id}"), subtitle=_where(e), title_align="left")


def evaluation_view(e: Evaluation) -> Panel:
    return Panel(_fields([("set", e.task_set), ("model", e.model_version), ("success", e.success),
                          ("reward", e.reward), ("steps", e.num_steps), ("failed checks", e.failed_checks),
                          ("trajectory", e.trajectory_id), ("task", e.task_id)]),
                 title=Text(f"evaluation {e.evaluation_id}"), subtitle=_where(e), title_align="left")


def record_view(record, limit: int | None = RESULT_CHARS, benchmark: str = "") -> RenderableType:
    """Any record's view; ``benchmark``: a verdict's domain's (``verdict_view``)."""
    if isinstance(record, Trajectory):
        return trajectory_view(record, limit)
    if isinstance(record, Verdict):
        return verdict_view(record, benchmark)
    views = {Blueprint: blueprint_view, SynthTask: task_view, Run: run_view,
             SFTExample: example_view, Evaluation: evaluation_view}
    return views[type(record)](record)


def sample_view(i: int, n: int, sample, limit: int | None = RESULT_CHARS, benchmark: str = ""
                ) -> list[RenderableType]:
    """One previewed sample: the blueprint, the user's instruction, the conversation, the verdict (``benchmark``:
    the domain's, ``verdict_view``)."""
    bp = sample.blueprint
    sel = bp.selected_dimensions
    summary = " · ".join(f"{k}={'/'.join(v)}" for k, v in sel.items() if v)
    out: list[RenderableType] = [Text(f"\nsample {i}/{n}: {summary}", style="bold"),
                                 Text(f"blueprint {bp.blueprint_id}: {bp.generation_intent}", style="magenta")]
    if sample.task is not None:
        out.append(Panel(_fields(instruction(sample.task).items()), title=Text(f"user instruction · task "
                         f"{sample.task.task_id}"), title_align="left", border_style="blue"))
    else:
        out.append(Text("no task: the generator could not realize this blueprint", style="yellow"))
    if sample.trajectory is not None:
        out.append(trajectory_view(sample.trajectory, limit))
    if sample.verdict is not None:
        out.append(verdict_view(sample.verdict, benchmark))
    return out
