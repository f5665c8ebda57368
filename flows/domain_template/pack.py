"""The pack: everything the core asks about this domain (``envs/packs.py`` documents every setting).

Required: ``name``, ``environment()``, ``ontology.json`` beside this file. The embedded backend needs
``task_builder`` (the generator) and ``evosyn run`` needs ``controllable``. The rest is optional, but a default
changes what is recorded: ``evosyn envs check NAME`` lists every one left at its default.
"""
from __future__ import annotations

from evosyn.envs.packs import DomainPack, PlannerRules, UserPhrasing


class Pack(DomainPack):
    name = __package__.rpartition(".")[2]  # the folder's name: `--domain NAME`
    description = "a gym's front desk: book and cancel places in classes under a booking limit"

    # ------------------------------------------------------------ required
    def environment(self):
        from .environment import GymDomain  # loaded on first use: registering the pack stays cheap

        return GymDomain()

    # ------------------------------------------------------------ observed factors (envs/factors.py)
    family_by_tool = {"book_class": "book_class", "cancel_booking": "cancel_booking"}  # write -> task_family
    family_keywords = [("cancel", "cancel_booking"), ("book", "book_class")]  # a task with no write: its request
    default_family = "book_class"
    focus_by_tool = {"book_class": "booking_limit", "cancel_booking": "identification"}  # write -> policy focus

    # ------------------------------------------------------------ tool-use patterns (envs/tool_patterns.py)
    shape_values = {"lookup_then_modify": "lookup_verify_then_modify", "multi_entity": "multi_entity_retrieval",
                    "check_before_action": "policy_check_before_action"}  # generic shape -> ontology value
    profile_reads = ("get_member_details",)
    identify_reads = ("get_member_details",)
    entity_keys = ("class_id",)
    gated_prefixes = ("book",)  # writes the policy check (a member lookup) must precede

    # ------------------------------------------------------------ synthesis
    # a refusal must break a rule: only a booking can (policy.py), so only book_class is ever refused
    planner_rules = PlannerRules(violable={"book_class": ["booking_limit"]})
    phrasing = UserPhrasing(identity="My member id is {user_id}.", known_identity="Your member id is {user_id}.",
                            give_identity="Sure, it is {user_id}.",
                            ask_identity="I can help with that. Could you please give me your member id first?",
                            vague_opening="I need help with my gym bookings.", vague_hint="my gym bookings",
                            unknown_info="You do not know the gym's internal rules.", identity_words=("member id",))
    # the properties the generator realizes exactly, with the buckets it can build (at most 3 bookings each, so
    # "3-4" only half the time; every task reads the member first, so never "0" reads): what the uniform test
    # set draws and the Reflector may promote
    controllable = {"num_write": ["0", "1", "2"], "num_read": ["1", "2", "3-4", "5+"]}

    def task_builder(self, domain, prior):
        from .generator import Generator

        return Generator(domain, prior)
