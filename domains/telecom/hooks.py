"""The telecom pack's synthesis hooks (planner rules, phrasing, controllable factors, entities, audit write).

``pack.py`` returns these; they live here so the pack module stays a map of names
and imports nothing heavy (this module imports only ``evosyn.envs.packs``). Each value is measured, not assumed: the feasibility of
every (family, outcome, num_write, num_read) cell is in tests/domains/telecom.
"""
from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from evosyn.agents.plans import sample_up_to
from evosyn.envs import properties
from evosyn.envs.packs import PlannerRules, UserPhrasing

if TYPE_CHECKING:
    from evosyn.storage.records import ToolCall


PLANNER_RULES = PlannerRules(
    # the foci each refusal breaks (refusals.RULES): refuel limit and contract end are contract rules, a payment
    # request for a bill that is not overdue or a resume with a bill unpaid are billing rules
    violable={"plan_change": ["contract_or_fee_constraint"],
              "billing_issue": ["billing_or_payment_constraint"],
              "line_management": ["billing_or_payment_constraint", "contract_or_fee_constraint", "eligibility_check"],
              "service_troubleshooting": ["contract_or_fee_constraint"],
              "device_upgrade": ["eligibility_check"],
              "account_profile_update": ["identity_or_authorization_constraint"]},
    # categorical refusals (more than 2 GB of data, a subjective recommendation) need no lookup
    no_read_refusals=["plan_change", "device_upgrade"],
    # every family but troubleshooting has a pure information request (a broken phone always needs a fix)
    info_families=["plan_change", "billing_issue", "device_upgrade", "line_management", "account_profile_update"],
    min_refusal_reads={"billing_issue": 2, "line_management": 2, "service_troubleshooting": 3,
                       "account_profile_update": 1},
    min_fulfil_reads={"plan_change": 3, "billing_issue": 2, "device_upgrade": 3, "line_management": 2,
                      "service_troubleshooting": 3, "account_profile_update": 2},
    reads_per_extra_write=1,
)

# the fewest reads a (family, outcome) task needs with one write (none for a refusal): identification plus the
# lookups the policy demands; below these the generator is infeasible (tests/domains/telecom/test_hooks.py).
# More writes need more reads (each request has its own lookups): PLANNER_RULES carries both.
MIN_READS = {
    ("plan_change", "fulfill"): 3, ("billing_issue", "fulfill"): 2, ("device_upgrade", "fulfill"): 3,
    ("line_management", "fulfill"): 2, ("service_troubleshooting", "fulfill"): 3,
    ("account_profile_update", "fulfill"): 2,
    ("plan_change", "refuse"): 0, ("billing_issue", "refuse"): 2, ("device_upgrade", "refuse"): 0,
    ("line_management", "refuse"): 2, ("service_troubleshooting", "refuse"): 3,
    ("account_profile_update", "refuse"): 1,
}

PHRASING = UserPhrasing(
    identity="My phone number is {user_id}.",
    give_identity="Sure, my phone number is {user_id}.",
    ask_identity="I can help with that. Could you please give me the phone number of your line first?",
    vague_opening="I have a problem with my phone service.",
    stress="Please be quick, I really need my phone working.",
    unknown_info="You do not know the carrier's internal rules.",
    identity_words=("phone number",),
)

# every bucket of each is realized (tests/domains/test_controllable.py)
CONTROLLABLE = properties.controllable("num_write", "num_read", "entities_touched", "distinct_tools", "write_mix",
                                       "interleaved")


def candidate_entities(domain: Any, rng: random.Random, k: int = 4) -> dict[str, Any]:
    """A seeded sample of customers with their lines, bills and plans, for the LLM generator's prompt."""
    db = domain.episode().env.tools.db
    customers = [c for c in db.customers if c.line_ids]
    out = []
    for c in sample_up_to(rng, customers, k):
        lines = [x for x in db.lines if x.line_id in c.line_ids]
        bills = [b for b in db.bills if b.bill_id in c.bill_ids]
        out.append({"customer_id": c.customer_id, "name": c.full_name,
                    "lines": [{"line_id": x.line_id, "phone_number": x.phone_number, "status": x.status.value,
                               "plan_id": x.plan_id, "roaming_enabled": x.roaming_enabled,
                               "contract_end_date": x.contract_end_date.isoformat()} for x in lines],
                    "bills": [{"bill_id": b.bill_id, "status": b.status.value, "total_due": b.total_due}
                              for b in bills]})
    plans = [{"plan_id": p.plan_id, "name": p.name, "data_limit_gb": p.data_limit_gb,
              "price_per_month": p.price_per_month, "refuel_price_per_gb": p.data_refueling_price_per_gb}
             for p in db.plans]
    return {"now": "2025-02-25", "customers": out, "plans": plans}


def extra_write(arguments: list[dict[str, Any]]) -> ToolCall | None:
    """A state-changing call the trajectory did not ask for: 1 GB refuelled on one of its lines (a refuel always
    changes the line; suspend_line or a roaming switch may find the line already in that state)."""
    from evosyn.storage.records import ToolCall

    line = next((a for a in arguments if "customer_id" in a and "line_id" in a), None)
    if line is None:
        return None
    return ToolCall(id="extra", name="refuel_data", arguments={"customer_id": line["customer_id"],
                                                               "line_id": line["line_id"], "gb_amount": 1.0})
