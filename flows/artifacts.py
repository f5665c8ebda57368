"""What a round and a run publish to their Prefect flow runs (the flow run page's Artifacts tab).

Each round: a table artifact of its metrics (``round-<r>-metrics-<run>``) and a
markdown artifact (``round-<r>-report-<run>``) with its stages (kept and
rejected by reason), the space diff, the Reflector's decision and evidence and
the Designer's focus and allocation. Each run: a summary table of its rounds
(``run-summary-<run>``). Keys are stable, so a resumed run adds a new version of
the same artifacts; Prefect allows only lowercase letters, digits and dashes.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from evosyn.tasks.overlap import overlap_warnings, score_line
from evosyn.tasks.progress import StageState, counts
from evosyn.storage.records import Direction, Reflection, SynthesisSpace

if TYPE_CHECKING:
    from evosyn.flows.round import RoundResult

SUMMARY_COLUMNS = ("verified_yield", "success_diagnostic", "success_test", "success_test_uniform", "success_test_scored",
                   "overlap_test_sets", "factor_coverage", "factor_balance", "interaction_coverage", "trajectory_diversity")


def artifact_key(*parts: object) -> str:
    """A Prefect artifact key: lowercase letters, digits and dashes (``round-1-metrics-<run id>``)."""
    key = re.sub(r"[^a-z0-9-]+", "-", "-".join(map(str, parts)).lower())
    return re.sub(r"-{2,}", "-", key).strip("-")


def round_keys(run_id: str, round: int) -> tuple[str, str]:
    """(metrics table key, report markdown key) of a round."""
    return artifact_key("round", round, "metrics", run_id), artifact_key("round", round, "report", run_id)


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ").strip() or "-"


def _table(columns: list[str], rows: list[list[object]]) -> str:
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(out)


def space_section(space_in: SynthesisSpace, space_out: SynthesisSpace) -> str:
    if space_out.version == space_in.version:
        return f"## Space\n\nv{space_in.version}, no change."
    rows = [[c.kind, c.factor, ", ".join(c.values), c.reason, c.evidence] for c in space_out.diff]
    return (f"## Space\n\nv{space_in.version} -> v{space_out.version}\n\n"
            + _table(["change", "factor", "values", "reason", "evidence"], rows))


def reflector_section(reflection: Reflection | None) -> str:
    if reflection is None:
        return "## Reflector\n\nNo Reflector in this arm: the space stays as it is."
    decision = (f"## Reflector\n\n**Decision:** {reflection.summary or 'no summary'} "
                f"(steering for the next round: {reflection.steering.replace('_', ' ')}; space "
                f"v{reflection.synthesis_space_version_in} -> v{reflection.synthesis_space_version_out})")
    parts = [decision]
    if reflection.dimension_reviews:
        parts.append(_table(["dimension", "decision", "reason", "evidence"],
                            [[d.dimension, d.decision, d.reason, d.evidence] for d in reflection.dimension_reviews]))
    if reflection.new_proposals:
        parts.append(_table(["proposal", "dimension", "values", "reason", "evidence"],
                            [[p.action, p.dimension_name, ", ".join(p.values), p.reason, p.evidence]
                             for p in reflection.new_proposals]))
    return "\n\n".join(parts)


def designer_section(directions: list[Direction]) -> str:
    total = sum(d.n_blueprints for d in directions) or 1
    steering = directions[0].steering.replace("_", " ") if directions else "none"
    rows = [[d.objective_type, d.objective, f"{d.n_blueprints} ({d.n_blueprints / total:.0%})",
             "; ".join(f"{k}={','.join(v)}" for k, v in d.preferred_values.items()), d.rationale]
            for d in directions]
    return (f"## Designer\n\nSteering: {steering}; {len(directions)} directions, {total} blueprints.\n\n"
            + _table(["objective type", "focus", "blueprints", "preferred values", "rationale"], rows))


def stages_section(stages: list[StageState]) -> str:
    rows = [[s.stage, s.kept, s.total if s.total is not None else s.done, counts(s.rejected, limit=8),
             s.detail, f"{s.elapsed:.1f}"] for s in stages]
    columns = ["stage", "kept (evaluate: succeeded)", "of", "rejected (evaluate: failed)", "detail", "seconds"]
    return "## Stages\n\n" + _table(columns, rows)


def round_markdown(run_id: str, res: RoundResult, stages: list[StageState]) -> str:
    m = res.metrics
    head = (f"# Round {res.round} of `{run_id}`\n\nverified {res.verified}/{res.blueprints} blueprints; success: "
            f"diagnostic {m.get('success_diagnostic', 0):.3f}, {score_line(m)} ({len(res.test)} official-matched, "
            f"{len(res.test_uniform)} uniform test tasks)")
    warnings = "\n\n".join(f"**{w}**" for w in overlap_warnings(m))
    return "\n\n".join([head, *([warnings] if warnings else []), stages_section(stages), space_section(res.space_in, res.space_out),
                        reflector_section(res.reflection), designer_section(res.directions)]) + "\n"


def publish_round(run_id: str, res: RoundResult, stages: list[StageState]) -> None:
    """The round's metrics table and report markdown, on the current (round) flow run."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    table_key, md_key = round_keys(run_id, res.round)
    create_table_artifact(key=table_key, table=[{"metric": k, "value": round(v, 4)} for k, v in
                                                sorted(res.metrics.items())],
                          description=f"Round {res.round} of {run_id}: metrics (as logged to MLflow)")
    create_markdown_artifact(key=md_key, markdown=round_markdown(run_id, res, stages),
                             description=f"Round {res.round} of {run_id}: stages, space diff, Reflector, Designer")


def publish_summary(run_id: str, rounds: list[dict], seconds: float, store_root: str) -> None:
    """The run's rounds as one table, on the current (run) flow run."""
    from prefect.artifacts import create_table_artifact

    table = [{"round": r["round"], **{c: round(r[c], 4) for c in SUMMARY_COLUMNS if c in r}, "space": r["diff"]}
             for r in rounds]
    create_table_artifact(key=artifact_key("run-summary", run_id), table=table,
                          description=f"Run {run_id}: {len(rounds)} rounds in {seconds:.0f}s; store {store_root}; "
                                      f"`evosyn report {run_id}` for plots and the evolution trace")
