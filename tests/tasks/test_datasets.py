"""SFT examples: the tool schemas validated once per domain give the rows that validating them per example gave."""
from __future__ import annotations

from agents.designer import ColdStart
from envs.ontology import load_initial_space
from envs.packs import get_domain
from tasks.datasets import _unit, sft_examples
from tasks.stages import Ctx
from tasks.synthesis import run_pass
from storage.records import SFTExample
from storage.store import Store


def test_examples_equal_the_per_example_validated_ones(tmp_path):
    space = load_initial_space("airline", run_id="ds")
    result = run_pass(Ctx(Store(tmp_path), "ds", 0, 3, "airline"), space, ColdStart(), 12)
    kept = [(c.task, c.trajectory) for c in result.kept]
    assert len(kept) >= 8
    schemas = [t.openai_schema() for t in get_domain("airline").tools("assistant")]
    want = [SFTExample(run_id=tr.run_id, round=tr.round, space_version=tr.space_version,
                       direction_id=tr.direction_id, blueprint_id=tr.blueprint_id,
                       example_id="ex-" + tr.trajectory_id[3:], task_id=t.task_id, trajectory_id=tr.trajectory_id,
                       split="diagnostic" if _unit(f"5/{t.task_id}") < 0.3 else "train", messages=tr.messages,
                       tools=schemas) for t, tr in kept]
    got = sft_examples(kept, 0.3, seed=5)
    assert [e.model_dump() for e in got] == [e.model_dump() for e in want]
    assert [e.model_dump_json() for e in got] == [e.model_dump_json() for e in want]
    assert {e.split for e in got} == {"train", "diagnostic"}  # both splits, as the seed decides
    assert got[0].tools and got[0].model_fields_set == want[0].model_fields_set
