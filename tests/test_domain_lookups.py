"""A domain is looked up by its name in the registry (``evosyn.envs.packs``) and the compile step
(``evosyn.flows.compile``) only; everything below receives the pack or environment it needs (the commands and
deployments in ``flows`` resolve through the compile step's functions, which the layering keeps out of reach of
the layers below). Issue "One package and one compile step".
"""
from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("storage", "config", "envs", "agents", "domains", "tasks", "flows", "benchmarks")
RESOLVERS = {"envs/packs.py", "flows/compile.py"}  # the registry and the compile step
LOOKUPS = ("get_pack", "get_domain")


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


def test_no_domain_is_looked_up_by_name_outside_the_registry_and_the_compile_step():
    now = found()
    assert not now, f"looks a domain up by name (pass the pack or environment down instead): {dict(now)}"


def test_the_count_sees_bare_and_attribute_calls():
    assert lookups("from x import get_pack\nget_pack('a').controllable\npacks.get_domain(n)\nget_packs()\n") == 2
