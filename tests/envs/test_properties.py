"""Trajectory properties: each measure on hand-built calls, and the same values from a replay and from a plan."""
import pytest

from evosyn.envs.packs import get_domain, get_pack
from evosyn.envs.properties import PROPERTIES, Call, bucket_index, check_prior, measure_all, min_writes
from evosyn.storage.userfiles import ConfigError


def _calls():
    r = lambda name, **a: Call(name, a, "read")  # noqa: E731
    w = lambda name, **a: Call(name, a, "write")  # noqa: E731
    return [r("get_user_details", user_id="u"), r("get_reservation_details", reservation_id="A"),
            w("update_reservation_baggages", reservation_id="A", total_baggages=2, nonfree_baggages=1,
              payment_id="p"),
            r("get_reservation_details", reservation_id="B"),
            w("update_reservation_passengers", reservation_id="B", passengers=[{"n": 1}, {"n": 2}]),
            r("search_direct_flight", origin="X", destination="Y", date="d"),
            w("cancel_reservation", reservation_id="C"),
            Call("cancel_reservation", {"reservation_id": "D"}, "write", changed=False)]  # a no-op write


def test_each_property_measures_the_calls():
    got = measure_all(_calls(), get_pack("airline"))
    assert got == {"num_write": "3-4", "num_read": "3-4", "entities_touched": "3+", "multi_item": "yes",
                   "money_moves": "1", "policy_gated": "1", "search_calls": "1", "distinct_tools": "4+",
                   "write_mix": "mixed", "interleaved": "yes", "user_actions": "0"}
    assert set(got) == set(PROPERTIES)
    empty = measure_all([], get_pack("airline"))
    assert empty["num_write"] == "0" and empty["multi_item"] == "no" and empty["write_mix"] == "none"
    assert measure_all([Call("toggle_data", {}, "write", by_user=True)] * 2, get_pack("telecom"))["user_actions"] \
        == "2+"


def test_write_needs_and_bucket_order():
    assert min_writes({"multi_item": ["yes"], "write_mix": ["mixed"]}) == 2
    assert min_writes({"multi_item": ["no"], "task_family": ["x"]}) == 0
    assert bucket_index("num_write", "3-4") == 3 and bucket_index("num_write", "7") is None
    assert bucket_index("task_family", "x") is None


def test_a_prior_names_controllable_properties_and_their_buckets():
    check_prior({"multi_item": {"yes": 0.2}}, get_pack("airline"))
    with pytest.raises(ConfigError, match=r"prior.suppress.turns: the airline generator does not control it"):
        check_prior({"turns": {"yes": 0.2}}, get_pack("airline"))
    with pytest.raises(ConfigError, match=r"prior.suppress.multi_item.maybe: not a bucket"):
        check_prior({"multi_item": {"maybe": 0.2}}, get_pack("airline"))


@pytest.mark.parametrize("domain", ["airline", "retail", "telecom"])
def test_the_generator_realizes_a_requested_property_and_the_verifier_observes_it(domain, tmp_path):
    """The property a plan measures is the property the verifier observes on the teacher's replay."""
    from evosyn.agents.designer import ColdStart
    from evosyn.envs.ontology import load_initial_space
    from evosyn.tasks.stages import Ctx
    from evosyn.tasks.synthesis import run_pass
    from evosyn.storage.records import Factor
    from evosyn.storage.store import Store

    key = "entities_touched"
    space = load_initial_space(get_pack(domain), run_id=f"p-{domain}")
    space = space.model_copy(update={"version": 2, "factors": space.factors + [
        Factor(key=key, values=list(PROPERTIES[key].values), status="experimental", observable=True, added_in=2)]})
    result = run_pass(Ctx(Store(tmp_path), space.run_id, 0, 0, get_domain(domain)), space, ColdStart(), 24)
    assert len(result.kept) >= 12
    assert all(k.verdict.observed[key] == k.task.requested[key] for k in result.kept)


def _planned(prior, key: str, n: int = 80) -> list[str]:
    """``key``'s bucket in each plan the embedded generator makes under ``prior`` for ``n`` cold-start airline
    blueprints (the infeasible ones left out)."""
    from evosyn.agents.generator import EmbeddedGenerator, plan_calls
    from evosyn.agents.planner import EmbeddedPlanner
    from evosyn.envs.ontology import load_initial_space
    from evosyn.envs.packs import get_domain
    from evosyn.storage.records import Direction

    dom, pack = get_domain("airline"), get_pack("airline")
    space = load_initial_space(pack, run_id="t")
    d = Direction(run_id="t", round=1, direction_id="d", condition_id="c", objective_type="exploration",
                  objective="x", budget_level="explore")
    gen, out = EmbeddedGenerator(dom, prior), []
    for i in range(n):
        bp = EmbeddedPlanner(rules=pack.planner_rules).plan(d, space, None, index=i, seed=0)
        try:
            plan = gen._plan(bp.selected_dimensions, bp.blueprint_id, bp.seed)
        except Exception:
            continue
        out.append(measure_all(plan_calls(dom, plan), pack, [key])[key])
    return out


def test_a_suppressed_bucket_is_rare_unless_selected():
    from evosyn.agents.plans import DefaultPrior

    def share(prior):
        made = _planned(prior, "multi_item")
        return sum(v == "yes" for v in made) / len(made)

    natural, none_kept = share(DefaultPrior()), share(DefaultPrior(suppress={"multi_item": {"yes": 0.0}}))
    assert natural > 0.05 and none_kept == 0.0


def test_prior_writes_set_the_write_counts_of_unselected_fulfilments():
    from evosyn.agents.plans import DefaultPrior

    default, many = _planned(DefaultPrior(), "num_write", 60), _planned(DefaultPrior(writes={5: 1.0}), "num_write", 60)
    assert sum(w in ("3-4", "5+") for w in default) < len(default) / 5  # mostly one write
    fulfilments = [w for w in many if w != "0"]  # refusals and information requests write nothing
    assert fulfilments and all(w == "5+" for w in fulfilments)
