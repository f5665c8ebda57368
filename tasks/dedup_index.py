"""The two tests of a near copy, over tasks of any family (``evosyn.envs.base.EnvTask``): MinHash over the user's
instruction, and the gold actions.

``instruction``: the word shingles of the user's instruction (the scenario's parts, the persona aside, in a fixed
order; a one-text instruction is its first part), sketched by datasketch's
``MinHash``; candidates come from a ``MinHashLSH``
index and the test holds when the MinHash estimate of the pair's Jaccard similarity reaches the threshold.
``actions``: the gold actions in order (requestor, name, arguments as canonical JSON) are the same.

A pair is a copy when its gold actions are the same and either its instructions are near or those actions change
state. Near instructions alone are not a copy: templated instructions that differ only in the record they name
("move record T1QOBS ..." / "... B41JHU ...") reach a Jaccard of 0.80-0.84 on one built-in test set, and
those are different tasks; their gold actions tell them apart. The same gold actions alone are a copy only when
they change state: a read-only or empty list is shared by different requests refused on the same record.

Everything here is a pure function of its inputs: LSH answers a set, so candidates are ranked by (tests met,
Jaccard, key) and ties never depend on hash order.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from datasketch import MinHash, MinHashLSH

from evosyn.envs.base import EnvTask

SCHEME = "affine32"  # datasketch's default since 2.0, pinned: stored Jaccard values stay comparable
SEED = 1
# recall before precision: LSH only proposes candidates, each confirmed by its own estimate; a copy the bands
# miss is a copy unreported
LSH_WEIGHTS = (0.1, 0.9)
_WORD = re.compile(r"\w+")
_FIELDS = ("reason_for_call", "known_info", "unknown_info", "task_instructions")


def instruction_text(task: EnvTask) -> str:
    """What the simulated user is told: the scenario's parts in a fixed order (who the user is left out: the
    same request from another persona is the same task)."""
    scenario = task.scenario
    return "\n".join(getattr(scenario, k) for k in _FIELDS if getattr(scenario, k))


def shingles(text: str, k: int) -> set[bytes]:
    """The lower-cased word k-grams of ``text`` (the whole text as one when it has fewer than k words)."""
    words = _WORD.findall(text.lower())
    if len(words) <= k:
        return {" ".join(words).encode()}
    return {" ".join(words[i:i + k]).encode() for i in range(len(words) - k + 1)}


def gold_actions(task: EnvTask) -> list[dict]:
    return [{"requestor": a.requestor, "name": a.name, "arguments": a.arguments} for a in task.gold_actions]


def actions_signature(actions: list[dict]) -> str:
    """A hash of the gold actions in order ("" for none): the same tool calls with the same arguments."""
    if not actions:
        return ""
    canon = [[a.get("requestor") or "assistant", a["name"], a.get("arguments") or {}] for a in actions]
    return hashlib.sha256(json.dumps(canon, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Params:
    threshold: float = 0.8
    num_perm: int = 128
    shingle: int = 3

    def key(self) -> str:
        return f"minhash-{SCHEME}-p{self.num_perm}-w{self.shingle}-j{self.threshold:g}"


@dataclass
class Signature:
    """One task's two fingerprints: its instruction's MinHash, its gold actions' signature and whether they write."""

    key: str
    minhash: MinHash
    actions: str
    writes: bool


def signatures(items: list[tuple[str, EnvTask]], params: Params, writes: Callable[[dict], bool]) -> list[Signature]:
    """(key, task) -> signatures; ``writes(action)``: whether a gold action changes state."""
    texts = [shingles(instruction_text(t), params.shingle) for _, t in items]
    hashes = MinHash.bulk(texts, num_perm=params.num_perm, seed=SEED, scheme=SCHEME)
    out = []
    for (key, task), mh in zip(items, hashes):
        acts = gold_actions(task)
        out.append(Signature(key, mh, actions_signature(acts), any(writes(a) for a in acts)))
    return out


@dataclass(frozen=True)
class Match:
    key: str
    jaccard: float
    by: tuple[str, ...]  # the tests that hold: "instruction", "actions"


@dataclass
class Index:
    """Signatures that later ones are compared with: an LSH index of the instructions, a map of the state-changing
    gold actions."""

    params: Params
    lsh: MinHashLSH = field(init=False)
    by_actions: dict[str, list[str]] = field(default_factory=dict)
    sigs: dict[str, Signature] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.lsh = MinHashLSH(threshold=self.params.threshold, num_perm=self.params.num_perm, weights=LSH_WEIGHTS)

    def add(self, sig: Signature) -> None:
        if sig.key in self.sigs:  # the same task again (it came back in a later round): indexed once
            return
        self.sigs[sig.key] = sig
        self.lsh.insert(sig.key, sig.minhash)
        if sig.writes:
            self.by_actions.setdefault(sig.actions, []).append(sig.key)

    def extend(self, sigs: Iterable[Signature]) -> None:
        for s in sigs:
            self.add(s)

    def matches(self, sig: Signature) -> list[Match]:
        """Every indexed task ``sig`` copies (the module doc's rule), best first (both tests, Jaccard, key)."""
        # ``sig`` itself is never in the index (it is asked before it is added): a key it shares is an earlier
        # occurrence of the same task
        near = set(self.lsh.query(sig.minhash))
        same = set(self.by_actions.get(sig.actions, ())) if sig.writes else set()
        out = []
        for key in near | same:
            other = self.sigs[key]
            if other.actions != sig.actions:
                continue
            j = float(sig.minhash.jaccard(other.minhash))
            if j >= self.params.threshold or sig.writes:
                out.append(Match(key, round(j, 4), ("instruction", "actions") if j >= self.params.threshold
                                 else ("actions",)))
        return sorted(out, key=lambda m: (-len(m.by), -m.jaccard, m.key))
