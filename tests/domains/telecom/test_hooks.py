"""The telecom pack hooks: planner rules and read minimums match what the generator realizes."""
from __future__ import annotations

import random

import pytest

from evosyn.agents.plans import Infeasible
from evosyn.domains.telecom.hooks import (
    MIN_READS,
    PLANNER_RULES,
    candidate_entities,
    extra_write,
)
from tests.domains.telecom.conftest import FAMILIES, selection

READS = {0: "0", 1: "1", 2: "2", 3: "3-4"}


def _feasible(generator, sel, seeds=range(10)) -> bool:
    for seed in seeds:
        try:
            generator.plan(sel, "bp-hooks", seed)
            return True
        except Infeasible:
            pass
    return False


@pytest.mark.parametrize("outcome", ["fulfill", "refuse"])
@pytest.mark.parametrize("family", FAMILIES)
def test_min_reads_is_the_fewest_reads_the_generator_realizes(generator, family, outcome):
    writes = "0" if outcome == "refuse" else "1"
    least = MIN_READS[(family, outcome)]
    assert _feasible(generator, selection(family, outcome, writes, READS[least]))
    if least > 0:
        assert not _feasible(generator, selection(family, outcome, writes, READS[least - 1]))


def test_planner_rules_match_the_generator(generator):
    for family in FAMILIES:
        info = _feasible(generator, selection(family, "fulfill", "0"))
        assert info == (family in PLANNER_RULES.info_families)
        no_read = _feasible(generator, selection(family, "refuse", "0", "0"))
        assert no_read == (family in PLANNER_RULES.no_read_refusals)
    assert set(PLANNER_RULES.violable) == set(FAMILIES)


def test_candidate_entities_and_extra_write(telecom):
    entities = candidate_entities(telecom, random.Random(0), k=2)
    assert len(entities["customers"]) == 2 and entities["plans"]
    ep = telecom.episode()
    call = extra_write([{"customer_id": "C1002", "line_id": "L1004"}])
    before = ep.state_digest()
    assert not ep.step(call.name, call.arguments).error and ep.state_digest() != before
    assert extra_write([{"id": "B1001"}]) is None
