"""tasks/dedup_index.py: the two tests of a near copy, and the rule that combines them."""
from __future__ import annotations

import copy
import itertools

from evosyn.envs.tau2.task import Tau2Task
from evosyn.tasks.dedup_index import (
    Index,
    Params,
    actions_signature,
    instruction_text,
    shingles,
    signatures,
)

P = Params()
WRITES = {"cancel_reservation", "update_reservation_baggages"}


def _writes(action: dict) -> bool:
    return action["name"] in WRITES


_IDS = itertools.count()


def task(reason: str, actions: list[tuple[str, dict]], how: str = "Confirm each change with 'yes'.") -> dict:
    """A tau2 task's JSON (edited in place by the tests; ``env_task`` makes it the family's task)."""
    return {"id": f"t{next(_IDS)}", "user_scenario": {"instructions": {
        "domain": "airline", "reason_for_call": reason, "known_info": "Your user id is mia_li_3668.",
        "unknown_info": "You do not know the airline's internal rules.", "task_instructions": how}},
        "evaluation_criteria": {"actions": [{"action_id": str(i), "name": n, "arguments": a, "requestor": "assistant"}
                                            for i, (n, a) in enumerate(actions)]}}


def env_task(data: dict) -> Tau2Task:
    return Tau2Task.from_json(data)


def cancel(rid: str, **kw) -> dict:
    return task(f"You want to cancel reservation {rid} and get a refund.",
                [("get_reservation_details", {"reservation_id": rid}), ("cancel_reservation", {"reservation_id": rid})],
                **kw)


def refused(rid: str, reason: str) -> dict:
    return task(reason.format(rid=rid), [("get_reservation_details", {"reservation_id": rid})],
                how="If the agent explains that this is not allowed, accept it and end the call.")


def matches(earlier: dict[str, dict], probe: dict) -> list:
    index = Index(P)
    index.extend(signatures([(k, env_task(v)) for k, v in earlier.items()], P, _writes))
    return index.matches(signatures([("probe", env_task(probe))], P, _writes)[0])


def test_the_instruction_is_every_field_in_a_fixed_order_and_a_string_as_it_is():
    t = cancel("ABC123")
    text = instruction_text(env_task(t))
    assert text.splitlines()[0].startswith("You want to cancel reservation ABC123")
    assert "mia_li_3668" in text and "internal rules" in text
    one_text = Tau2Task.from_json({"id": "s", "user_scenario": {"instructions": "Cancel my trip."}})
    assert instruction_text(one_text) == "Cancel my trip."
    assert shingles("One two", 3) == {b"one two"}
    assert shingles("A b c d", 3) == {b"a b c", b"b c d"}


def test_the_actions_signature_is_order_and_argument_sensitive_and_empty_for_no_actions():
    a = [{"name": "x", "arguments": {"k": 1, "j": 2}}, {"name": "y", "arguments": {}}]
    assert actions_signature(a) == actions_signature(copy.deepcopy(a)[::-1][::-1])
    assert actions_signature(a) != actions_signature(a[::-1])
    assert actions_signature(a) != actions_signature([{"name": "x", "arguments": {"k": 1, "j": 3}}, a[1]])
    assert actions_signature([{**a[0], "requestor": "user"}, a[1]]) != actions_signature(a)
    assert actions_signature([]) == ""


def test_a_copy_with_an_edited_instruction_is_found_by_both_tests():
    original = cancel("ABC123")
    near = copy.deepcopy(original)
    near["user_scenario"]["instructions"]["task_instructions"] += " Be quick."
    [m] = matches({"orig": original}, near)
    assert m.key == "orig" and m.by == ("instruction", "actions") and P.threshold <= m.jaccard < 1.0


def test_the_same_state_change_reworded_is_a_copy_by_its_actions():
    original = cancel("ABC123")
    reworded = cancel("ABC123", how="Sound stressed. Start vaguely and hesitate before you agree to anything.")
    reworded["user_scenario"]["instructions"]["reason_for_call"] = "Please drop booking ABC123, I need my money back."
    [m] = matches({"orig": original}, reworded)
    assert m.by == ("actions",) and m.jaccard < P.threshold


def test_templated_tasks_on_other_records_are_not_copies():
    """The same template on another reservation: near instructions, other gold actions (the false positives a
    Jaccard test alone gives on the airline test set)."""
    earlier = {rid: cancel(rid) for rid in ("ABC123", "QWE456", "ZXC789")}
    assert matches(earlier, cancel("RTY000")) == []
    earlier = {rid: refused(rid, "You want to move reservation {rid} to a later date.") for rid in ("ABC123", "QWE456")}
    assert matches(earlier, refused("RTY000", "You want to move reservation {rid} to a later date.")) == []


def test_a_shared_read_only_gold_is_not_a_copy_without_a_near_instruction():
    """Two refusals on one reservation share their lookup; they are different requests."""
    move = refused("ABC123", "You want to move reservation {rid} to a later date.")
    bags = refused("ABC123", "You want to ask how many bags travel free on reservation {rid}, and why you paid for two "
                             "of them last time when your friend paid for none.")
    assert matches({"move": move}, bags) == []
    assert [m.key for m in matches({"move": move}, copy.deepcopy(move))] == ["move"]


def test_matches_are_ranked_by_tests_then_jaccard_then_key_whatever_the_insertion_order():
    original = cancel("ABC123")
    reworded = cancel("ABC123", how="Sound stressed and hesitate.")
    items = {"b": copy.deepcopy(original), "a": copy.deepcopy(original), "c": reworded}
    first = [m.key for m in matches(items, original)]
    second = [m.key for m in matches(dict(reversed(list(items.items()))), original)]
    assert first == second == ["a", "b", "c"]
