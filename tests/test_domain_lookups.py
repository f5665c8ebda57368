"""A domain is looked up by its name in the registry (``evosyn.envs.packs``) and the compile step
(``evosyn.flows.compile``); everything below receives the pack or environment it needs.

The move is not finished: the modules below still look a domain up by name, each at most the number of times
recorded here. The table only shrinks: a new look-up (in a new module, or one more in a listed one) fails, and a
module that no longer looks one up must leave the table (so the count cannot creep back). The aim is an empty
table (issue "One package and one compile step").
"""
from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("storage", "config", "envs", "agents", "domains", "tasks", "flows", "benchmarks")
RESOLVERS = {"envs/packs.py", "flows/compile.py"}  # the registry and the compile step
LOOKUPS = ("get_pack", "get_domain")
STILL_LOOKING_UP = {
    "benchmarks/cli_stages.py": 2,
    "benchmarks/discovery.py": 2,
    "benchmarks/discovery_gaps.py": 3,
    "benchmarks/fuzz.py": 1,
    "benchmarks/learner.py": 2,
    "benchmarks/llm_script.py": 1,
    "benchmarks/verify.py": 1,
    "envs/base.py": 1,
    "envs/pack_check.py": 2,
    "envs/reference.py": 1,
    "tasks/context.py": 1,
    "tasks/learn.py": 3,
    "tasks/metrics.py": 1,
    "tasks/reports/data.py": 2,
}


def lookups(source: str) -> int:
    """Calls of ``get_pack`` / ``get_domain`` (bare or as an attribute: ``packs.get_pack(...)``)."""
    n = 0
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            n += name in LOOKUPS
    return n


def found(root: Path = ROOT) -> Counter:
    out: Counter = Counter()
    for layer in LAYERS:
        for path in sorted((root / layer).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel not in RESOLVERS and (n := lookups(path.read_text())):
                out[rel] = n
    return out


def test_domain_lookups_only_shrink():
    now = found()
    grown = {m: n for m, n in now.items() if n > STILL_LOOKING_UP.get(m, 0)}
    assert not grown, f"looks a domain up by name (pass the pack or environment down instead): {grown}"
    gone = {m: n for m, n in STILL_LOOKING_UP.items() if now.get(m, 0) < n}
    assert not gone, f"fewer look-ups than recorded: lower STILL_LOOKING_UP to {dict(now)} for {sorted(gone)}"


def test_the_count_sees_bare_and_attribute_calls():
    assert lookups("from x import get_pack\nget_pack('a').controllable\npacks.get_domain(n)\nget_packs()\n") == 2
