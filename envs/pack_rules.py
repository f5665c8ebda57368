"""The rules and wording a domain pack hands the embedded planner and user simulator (``evosyn.envs.packs``
re-exports both: a pack imports them from there)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PlannerRules:
    """Compatibility rules of the embedded planner for one domain.

    ``violable``: task family -> the policy foci a refusal of that family can break
    (a refusal must name one). ``no_read_refusals``: families whose refusal needs
    no lookup (a categorical rule). ``info_families``: families that can be pure
    information requests (a fulfilment with no writes). ``min_refusal_reads``:
    families whose refusal needs more than one lookup -> how many (a refusal
    with fewer reads is planned as another violable family). ``min_fulfil_reads``:
    family -> the fewest reads a fulfilment with one write needs (identification
    plus the lookups the policy demands), and ``reads_per_extra_write`` the reads
    each further write adds; a fulfilment whose ``num_read`` bucket is below that
    gets a bucket that can hold it. ``implies``: ``"factor=value"`` (or several joined by ``&``, all selected) ->
    {factor: the values it goes with}: a blueprint that selects the value gets one of those (a task type fixes the
    behaviour it tests); the rules apply in their order, so a later one sees what an earlier one forced.
    """

    violable: dict[str, list[str]] = field(default_factory=dict)
    no_read_refusals: list[str] = field(default_factory=list)
    info_families: list[str] = field(default_factory=list)
    min_refusal_reads: dict[str, int] = field(default_factory=dict)
    min_fulfil_reads: dict[str, int] = field(default_factory=dict)
    reads_per_extra_write: int = 0
    implies: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    @property
    def defined(self) -> bool:
        """Whether the pack states any rule (a pack without rules leaves LLM blueprints unchecked)."""
        return bool(self.violable or self.no_read_refusals or self.info_families or self.min_refusal_reads
                    or self.implies)


@dataclass(frozen=True)
class UserPhrasing:
    """How the embedded user simulator and teacher word domain facts.

    ``identity`` is formatted with the scenario's ``user_id`` (the customer's
    identifier, whatever the domain calls it).
    """

    identity: str = "My customer id is {user_id}."
    known_identity: str = "Your customer id is {user_id}."  # the task's known_info when the plan gives none
    give_identity: str = "Sure, it is {user_id}."
    ask_identity: str = "I can help with that. Could you please give me your customer id first?"
    vague_opening: str = "I need help with my account."
    vague_hint: str = "something on my account"  # how the task text quotes a vague start
    stress: str = "Please be quick, this is really stressing me out."
    unknown_info: str = "You do not know the company's internal rules."
    identity_words: tuple[str, ...] = ("customer id",)  # what an agent's request for the identity mentions
