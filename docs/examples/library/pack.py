"""The library domain pack: its maps, rules, phrasing and hooks (``envs/packs.py`` documents every field)."""
from __future__ import annotations

from evosyn.envs import properties
from evosyn.envs.packs import PlannerRules, UserPhrasing
from evosyn.envs.tau2.pack import Tau2Pack


class LibraryPack(Tau2Pack):
    name = "library"
    description = "a small lending library: borrow and return books under a loan limit and a fines rule"

    tau2_module = f"{__package__}.environment"  # the tau2 module (get_environment, get_tasks, get_tasks_split)
    copy_on_write = False  # a small DB: each episode deep-copies it

    # ------------------------------------------------------------ observed factors (envs/factors.py)
    family_by_tool = {"borrow_book": "borrow_book", "return_book": "return_book"}
    family_keywords = [("return", "return_book"), ("borrow", "borrow_book")]
    default_family = "borrow_book"
    focus_by_tool = {"borrow_book": "loan_limit", "return_book": "ownership"}

    # ------------------------------------------------------------ tool-use patterns (envs/tool_patterns.py)
    shape_values = {"lookup_then_modify": "lookup_verify_then_modify", "multi_entity": "multi_entity_retrieval",
                    "check_before_action": "policy_check_before_action",
                    "confirmed_change": "state_change_with_confirmation"}
    profile_reads = ("get_member_details",)
    identify_reads = ("get_member_details",)
    entity_keys = ("book_id",)
    gated_prefixes = ("borrow",)

    # ------------------------------------------------------------ synthesis
    planner_rules = PlannerRules(violable={"borrow_book": ["loan_limit", "unpaid_fines"],
                                           "return_book": ["ownership"]})
    phrasing = UserPhrasing(identity="My member id is {user_id}.", known_identity="Your member id is {user_id}.",
                            ask_identity="I can help with that. Could you please give me your member id first?",
                            vague_opening="I need help with my library account.", vague_hint="my library account",
                            unknown_info="You do not know the library's internal rules.",
                            identity_words=("member id",))
    controllable = properties.controllable("num_write", "num_read")  # realized exactly by the generator

    def task_builder(self, domain, prior):
        from .generator import LibraryGenerator  # loaded on first use: registering the pack stays cheap

        return LibraryGenerator(domain, prior)
