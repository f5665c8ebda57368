import pytest
from pydantic import ValidationError

from evosyn.storage import records as R
from evosyn.storage.arrow import schema_of
from tests.storage.samples import samples


def test_every_record_type_has_a_sample_and_a_table():
    assert set(samples()) == set(R.TABLES)


@pytest.mark.parametrize("table", sorted(R.TABLES))
def test_schema_is_stable_and_has_lineage(table):
    model = R.TABLES[table]
    schema = schema_of(model)
    assert schema.equals(schema_of(model))
    for col in ("run_id", "round", "space_version", "direction_id", "blueprint_id"):
        assert col in schema.names


def test_unknown_fields_are_refused():
    with pytest.raises(ValidationError, match="extra"):
        R.CheckResult(name="x", passed=True, bogus=1)


def test_space_lookup_names_known_factors():
    space = samples()["spaces"]
    assert space.factor("num_write").values[-1] == "5+"
    with pytest.raises(KeyError, match="known: num_write"):
        space.factor("nope")
