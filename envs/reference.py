"""Fixed reference value sets of the eight observed factors, per domain (App. B.1 metrics).

The same sets serve every compared arm, seed and round, whatever each run's
space evolved into: the ontology's initial values for the four semantic factors,
and fixed sets for the factors the verifier measures (envs/factors.py). The
interaction templates are the paper's pairs (task family x tool pattern, task
family x outcome, tool pattern x state change, computation x write complexity).
"""
from __future__ import annotations

from functools import lru_cache

from evosyn.envs.factors import BUCKETS
from evosyn.envs.packs import DomainPack, known

ONTOLOGY_FACTORS = ("task_family", "tool_use_pattern", "expected_outcome", "policy_or_constraint_focus")
INTERACTION_TEMPLATES = [("task_family", "tool_use_pattern"), ("task_family", "expected_outcome"),
                         ("tool_use_pattern", "state_change_type"), ("computation", "num_write")]


@lru_cache(maxsize=None)
def _ontology(pack: DomainPack) -> dict[str, list[str]]:
    raw = pack.initial_space()
    return {f["key"]: list(f["values"]) for f in raw["factors"]}


def reference_values(pack: DomainPack) -> dict[str, list[str]]:
    """factor -> its fixed reference values V_k (eight observed factors) of the domain of ``pack`` (the one the
    caller resolved: a run's, whose stored rows are measured)."""
    if not pack.has_environment:  # no verifier, so no observed factors to measure
        raise ValueError(f"no observed-factor reference sets for domain {pack.name!r}; known: "
                         f"{', '.join(known(with_environment=True))}")
    onto = _ontology(pack)
    ref = {k: onto[k] for k in ONTOLOGY_FACTORS if k in onto}
    # a space without an outcome factor (CAR-bench's) is measured on the verifier's own outcome values
    ref.setdefault("expected_outcome", ["fulfill", "refuse"])
    # the state-change kinds the domain's write tools can realize (its pack's change kinds), plus none / mixed
    ref.update({"state_change_type": list(pack.state_changes), "computation": ["none", "required"],
                "num_write": list(BUCKETS), "num_read": list(BUCKETS)})
    return ref
