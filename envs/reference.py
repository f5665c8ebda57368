"""Fixed reference value sets of the eight observed factors, per domain (App. B.1 metrics).

The same sets serve every compared arm, seed and round, whatever each run's
space evolved into: the ontology's initial values for the four semantic factors,
and fixed sets for the factors the verifier measures (envs/factors.py). The
interaction templates are the paper's pairs (task family x tool pattern, task
family x outcome, tool pattern x state change, computation x write complexity).
"""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from envs.factors import BUCKETS

ONTOLOGY_FACTORS = ("task_family", "tool_use_pattern", "expected_outcome", "policy_or_constraint_focus")
# the state-change kinds a domain's write tools can realize (envs/factors.py _CHANGE_KIND), plus none / mixed
STATE_CHANGES = {
    "airline": ["none", "create", "modify", "cancel", "compensate", "mixed"],
    "retail": ["none", "modify", "cancel", "return_exchange", "mixed"],
    "telecom": ["none", "modify", "mixed"],
}
INTERACTION_TEMPLATES = [("task_family", "tool_use_pattern"), ("task_family", "expected_outcome"),
                         ("tool_use_pattern", "state_change_type"), ("computation", "num_write")]


@lru_cache(maxsize=None)
def _ontology(domain: str) -> dict[str, list[str]]:
    raw = json.loads(resources.files("envs.ontologies").joinpath(f"{domain}.json").read_text())
    return {f["key"]: list(f["values"]) for f in raw["factors"]}


def reference_values(domain: str) -> dict[str, list[str]]:
    """factor -> its fixed reference values V_k (eight observed factors)."""
    if domain not in STATE_CHANGES:
        raise ValueError(f"no observed-factor reference sets for domain {domain!r}; known: "
                         f"{', '.join(STATE_CHANGES)}")
    onto = _ontology(domain)
    ref = {k: onto[k] for k in ONTOLOGY_FACTORS}
    ref.update({"state_change_type": list(STATE_CHANGES[domain]), "computation": ["none", "required"],
                "num_write": list(BUCKETS), "num_read": list(BUCKETS)})
    return ref
