"""Copy-on-write episodes: isolated from each other and equal-by-digest iff equal-by-tau2-hash."""
from tau2.domains.airline.environment import get_environment

CANCEL = ("cancel_reservation", {"reservation_id": "EHGLP3"})
BAGS = ("update_reservation_baggages", {"reservation_id": "EHGLP3", "total_baggages": 3, "nonfree_baggages": 0,
                                        "payment_id": "gift_card_9562694"})


def test_episodes_do_not_leak_into_each_other_or_the_base(airline):
    base_hash = airline.cow.digest(airline.cow.base)
    a, b = airline.episode(), airline.episode()
    obs = a.step(*CANCEL)
    assert not obs.error and '"status": "cancelled"' in obs.content
    assert '"status": null' in b.step("get_reservation_details", {"reservation_id": "EHGLP3"}).content
    assert airline.cow.base.reservations["EHGLP3"].status is None
    assert airline.cow.digest(airline.cow.base) == base_hash
    assert a.state_digest() != b.state_digest()


def test_digest_agrees_with_tau2_full_hash(airline):
    sequences = [[CANCEL], [BAGS], [CANCEL, BAGS], [BAGS, CANCEL], [("get_user_details", {"user_id": "emma_kim_9957"})]]
    ours, theirs = [], []
    for seq in sequences:
        ep, env = airline.episode(), get_environment()
        for name, args in seq:
            ep.step(name, args)
            env.use_tool(name, **args)
        ours.append(ep.state_digest())
        theirs.append(env.get_db_hash())
    # same partition of sequences into equal states
    for i in range(len(sequences)):
        for j in range(len(sequences)):
            assert (ours[i] == ours[j]) == (theirs[i] == theirs[j]), (sequences[i], sequences[j])
    assert ours[4] == airline.episode().state_digest()  # a read changes nothing


def test_new_entities_count_as_changes(airline):
    ep = airline.episode()
    before = ep.state_digest()
    ep.env.tools.db.reservations["NEW001"] = airline.cow.base.reservations["EHGLP3"].model_copy()
    assert ep.state_digest() != before
    del ep.env.tools.db.reservations["NEW001"]
    assert ep.state_digest() == before
