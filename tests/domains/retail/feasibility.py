"""Feasibility of the embedded retail generator, per (family, outcome, bucket), over seeds.

Run: ``PYTHONPATH=. python -m tests.domains.retail.feasibility [seeds]``. A combination is
realized for a seed when ``plan`` returns, every gold action executes without error on a
fresh episode and passes the retail policy rules, every write changes the state, the
requested bucket is exact, and a refusal's request really breaks its stated rule.
"""
from __future__ import annotations

import sys
import time
from collections import Counter

from evosyn.agents.plans import BUCKET_RANGE, Infeasible
from evosyn.domains.retail.generator import RetailGenerator
from evosyn.domains.retail.refusals import VIOLABLE
from evosyn.envs.factors import bucket
from evosyn.envs.packs import get_pack
from tests.domains.retail.checks import plan_problems

FAMILIES = ["order_cancellation", "order_item_modification", "order_logistics_modification",
            "return_delivered_order", "exchange_delivered_order", "profile_or_inquiry"]
DIFFICULTIES = ["easy", "medium", "hard"]


def rate(gen, domain, sel: dict, key: str, seeds: int, codes: Counter) -> tuple[int, Counter]:
    ok, why = 0, Counter()
    for seed in range(seeds):
        s = dict(sel, difficulty_profile=[DIFFICULTIES[seed % 3]])
        try:
            plan = gen.plan(s, f"feas-{key}", seed)
        except Infeasible:
            why["infeasible"] += 1
            continue
        problems, writes, reads = plan_problems(domain, plan)
        got = {"num_write": writes, "num_read": reads}[key]
        if problems:
            why["invalid"] += 1
        elif bucket(got) != sel[key][0]:
            why["bucket"] += 1
        else:
            ok += 1
            if plan.refusal:
                codes[plan.refusal["code"]] += 1
    return ok, why


def main(seeds: int = 30) -> None:
    start = time.process_time()
    pack = get_pack("retail")
    domain = pack.environment()
    domain.bind_pack(pack)
    gen = RetailGenerator(domain)
    codes: Counter = Counter()
    for key in ("num_write", "num_read"):
        print(f"\n{key}: realized / {seeds} seeds (fulfill | refuse)")
        print(f"{'family':30s} " + " ".join(f"{b:>11s}" for b in BUCKET_RANGE))
        for family in FAMILIES:
            cells = []
            for b in BUCKET_RANGE:
                parts = []
                for outcome in ("fulfill", "refuse"):
                    if key == "num_write" and outcome == "refuse" and b != "0":
                        parts.append("  -")
                        continue
                    sel = {"task_family": [family], "expected_outcome": [outcome], key: [b]}
                    ok, _ = rate(gen, domain, sel, key, seeds, codes)
                    parts.append(f"{ok:3d}")
                cells.append("|".join(parts).rjust(11))
            print(f"{family:30s} " + " ".join(cells))
    print(f"\nrefusals with a selected policy focus: realized / {seeds} seeds")
    for family, foci in VIOLABLE.items():
        for focus in foci:
            sel = {"task_family": [family], "expected_outcome": ["refuse"], "num_write": ["0"],
                   "policy_or_constraint_focus": [focus]}
            ok, _ = rate(gen, domain, sel, "num_write", seeds, Counter())
            print(f"  {family:30s} {focus:30s} {ok:3d}")
    print("\nrefusal rule codes realized:", dict(codes))
    print(f"CPU time: {time.process_time() - start:.1f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
