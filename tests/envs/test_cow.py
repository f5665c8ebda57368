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


def test_a_write_copies_only_the_members_it_looks_up(airline):
    """A flight's dates are copied one by one, when a write looks them up; the base never changes."""
    ep = airline.episode()
    res = airline.cow.base.reservations["EHGLP3"]
    seg = res.flights[0]
    before = airline.cow.base.flights[seg.flight_number].model_dump()
    flight = ep.env.tools.db.flights[seg.flight_number]  # outside a read tool: a private copy
    assert flight is not airline.cow.base.flights[seg.flight_number]
    status = flight.dates[seg.date]
    assert status is not airline.cow.base.flights[seg.flight_number].dates[seg.date]
    other = next(d for d in dict.keys(flight.dates) if d != seg.date)
    assert dict.__getitem__(flight.dates, other) is airline.cow.base.flights[seg.flight_number].dates[other]
    status.available_seats["economy"] -= 1
    assert airline.cow.base.flights[seg.flight_number].model_dump() == before
    assert ep.state_digest() != airline.episode().state_digest()
    status.available_seats["economy"] += 1
    ep.env.tools.db.flights[seg.flight_number]  # looked up again: re-checked at the next digest
    assert ep.state_digest() == airline.episode().state_digest()


def test_clone_dumps_like_a_deep_copy(airline, telecom):
    from evosyn.envs.tau2.cow import clone
    from evosyn.envs.tau2.entities import dump

    for entity in [next(iter(airline.cow.base.flights.values())), next(iter(airline.cow.base.users.values())),
                   telecom.cow.base.bills[0], telecom.user_cow.base.device]:
        copy = clone(entity)
        assert dump(copy) == dump(entity.model_copy(deep=True)) and copy is not entity
        assert copy.model_fields_set == entity.model_fields_set
        assert copy == entity  # pydantic's equality: the fields, the extras and the private state


def test_a_clone_has_its_own_extras_and_the_fields_set_of_the_original():
    from pydantic import BaseModel, ConfigDict

    from evosyn.envs.tau2.cow import clone
    from evosyn.envs.tau2.entities import SAME, compare

    class Item(BaseModel):
        model_config = ConfigDict(extra="allow")
        name: str
        tags: list[str] = []

    item = Item(name="a", notes=["x"])
    copy = clone(item)
    assert copy == item and copy.model_fields_set == item.model_fields_set and copy.model_extra == {"notes": ["x"]}
    assert compare(copy, item) == SAME
    copy.model_extra["notes"].append("y")
    copy.tags.append("t")
    assert item.model_extra == {"notes": ["x"]} and item.tags == []


def test_a_fresh_episode_db_keeps_the_base_fields_set_and_field_order(airline, telecom):
    for cow in (airline.cow, telecom.cow, telecom.user_cow):
        db, _ = cow.fresh()
        assert type(db) is cow.model and db.model_fields_set == cow.base.model_fields_set
        assert list(vars(db)) == list(vars(cow.base)) and db.model_extra == cow.base.model_extra


def _models(kind: type, seen: set) -> set:
    """Every pydantic model class reachable from ``kind``'s field annotations."""
    import typing

    from pydantic import BaseModel

    if isinstance(kind, type) and issubclass(kind, BaseModel):
        if kind in seen:
            return seen
        seen.add(kind)
        for field in kind.model_fields.values():
            _models(field.annotation, seen)
    for arg in typing.get_args(kind):
        _models(arg, seen)
    return seen


def test_tau2_db_models_keep_no_private_state(airline, retail, telecom):
    """``clone`` shares a model's private attributes with the original (pydantic's ``model_copy`` is a
    shallow copy), which is right only while tau2's DB models have none: this fails when one gets some."""
    kinds: set = set()
    for cow in (airline.cow, retail.cow, telecom.cow, telecom.user_cow):
        _models(cow.model, kinds)
    assert {"Flight", "Reservation", "Order", "Line", "MockPhoneAttributes"} <= {k.__name__ for k in kinds}
    assert [k.__name__ for k in kinds if k.__private_attributes__] == []


def test_plain_model_sees_serializers_and_excluded_fields():
    """``_plain_model`` reads pydantic's private ``__pydantic_decorators__`` (pydantic has no public way to list
    a model's serializers; nothing else in the project reads it): this fails if pydantic changes it."""
    from pydantic import BaseModel, Field, field_serializer, model_serializer

    from evosyn.envs.tau2.entities import DIFFERENT, UNSURE, _plain_model, compare

    class Plain(BaseModel):
        a: int

    class FieldSerializer(BaseModel):
        a: int

        @field_serializer("a")
        def same_a(self, value: int) -> int:
            return 0

    class ModelSerializer(BaseModel):
        a: int

        @model_serializer
        def nothing(self) -> dict:
            return {}

    class Excluded(BaseModel):
        a: int = Field(exclude=True)

    assert _plain_model(Plain)
    assert not any(_plain_model(k) for k in (FieldSerializer, ModelSerializer, Excluded))
    # what it is for: values that differ are a differing dump only when every field dumps as its value
    assert compare(Plain(a=1), Plain(a=2)) == DIFFERENT and compare(FieldSerializer(a=1), FieldSerializer(a=2)) == UNSURE


def test_same_is_never_fooled_by_equal_values_of_other_types():
    from evosyn.envs.tau2.entities import same

    assert same({"a": [1, "x"]}, {"a": [1, "x"]})
    assert not same({"a": 1}, {"a": 1.0}) and not same([True], [1]) and not same(0.0, -0.0)
    assert not same(float("nan"), float("nan"))
    assert not same({"a": 1}, {"a": 1, "b": 2})


def test_list_tables_copy_on_write_and_digest_by_position(telecom):
    ep = telecom.episode()
    db = ep.env.tools.db
    base_line = telecom.cow.base.lines[0]
    with ep.reading():
        assert db.lines[0] is base_line and next(iter(db.lines)) is base_line
    line = db.lines[0]
    assert line is not base_line and db.lines._owned == {0}
    line.roaming_enabled = not base_line.roaming_enabled
    changed = ep.state_digest()
    assert changed != telecom.episode().state_digest()
    line.roaming_enabled = base_line.roaming_enabled
    db.lines[0]
    assert ep.state_digest() == telecom.episode().state_digest()
    db.bills.append(telecom.cow.base.bills[0].model_copy(deep=True))  # a new entity is a change
    assert ep.state_digest() != telecom.episode().state_digest()
    db.bills.pop()  # any other change of shape: the whole table is compared
    assert ep.state_digest() == telecom.episode().state_digest()
    assert telecom.cow.base.lines[0].roaming_enabled == base_line.roaming_enabled


def test_device_changes_are_seen_by_the_digest(telecom):
    ep = telecom.episode()
    fresh = ep.state_digest()
    assert not ep.step("toggle_airplane_mode", {}, "user").error
    toggled = ep.state_digest()
    assert toggled != fresh
    assert not ep.step("toggle_airplane_mode", {}, "user").error
    assert ep.state_digest() != toggled
    ep.env.user_tools.db.device.battery_level += 1  # a direct change, no step in between
    assert ep.state_digest() != toggled
    assert telecom.user_cow.base.device.airplane_mode is False


def test_the_sync_reads_the_agent_db_until_a_request_is_paid(telecom):
    from tau2.data_model.tasks import EnvFunctionCall

    ep = telecom.episode()
    line = telecom.cow.base.lines[0]
    ep.run_function(EnvFunctionCall(env_type="user", func_name="set_user_info", arguments={
        "name": "x", "phone_number": line.phone_number}))
    owned = {name: set(getattr(ep.env.tools.db, name)._owned) for name in telecom.cow.tables}
    assert not any(owned.values())  # syncing the phone with its line copied nothing


def test_compare_says_different_only_when_dumps_differ():
    from evosyn.envs.tau2.entities import DIFFERENT, SAME, UNSURE, compare, dump

    cases = [({"a": 1}, {"a": 2}), ({"a": "x"}, {"a": "y"}), ([1, 2], [1]), ({"a": 1}, {"b": 1}),
             ({"a": 1}, {"a": 1.0}), ({1: "x"}, {"1": "x"}), (0.0, -0.0), ([True], [1]), ({"a": [1]}, {"a": [1]})]
    for a, b in cases:
        verdict = compare(a, b)
        if verdict == SAME:
            assert dump(a) == dump(b), (a, b)
        if verdict == DIFFERENT:
            assert dump(a) != dump(b), (a, b)
    assert compare({"a": 1}, {"a": 2}) == DIFFERENT and compare({1: "x"}, {"1": "x"}) == UNSURE
