"""Each pack's declared ``controllable`` properties: every bucket is realized and verified as requested."""
import pytest

from evosyn.agents.designer import ColdStart
from evosyn.envs.ontology import load_initial_space
from evosyn.envs.packs import get_pack
from evosyn.envs.properties import PROPERTIES
from evosyn.tasks.stages import Ctx
from evosyn.tasks.synthesis import run_pass
from evosyn.storage.records import Factor
from evosyn.storage.store import Store
from evosyn.envs.packs import get_domain

DOMAINS = ["airline", "retail", "telecom"]


def _space(domain, key):
    space = load_initial_space(get_pack(domain), run_id=f"ctl-{domain}-{key}")
    values = get_pack(domain).controllable[key]
    return space.model_copy(update={"version": 2, "factors": space.factors + [
        Factor(key=key, values=values, status="experimental", observable=True, added_in=2)]})


@pytest.mark.parametrize("domain", DOMAINS)
def test_each_pack_declares_six_controllable_properties_beyond_its_initial_space(domain):
    pack = get_pack(domain)
    initial = {f["key"] for f in pack.initial_space()["factors"]}
    beyond = [k for k in pack.controllable if k not in initial]
    assert len(beyond) >= 6, beyond
    for key, values in pack.controllable.items():
        assert key in PROPERTIES and values == list(PROPERTIES[key].values)


@pytest.mark.slow
@pytest.mark.parametrize("domain", DOMAINS)
def test_every_bucket_of_every_controllable_property_is_realized_and_verified(domain, tmp_path):
    store = Store(tmp_path)
    missing = []
    for key in get_pack(domain).controllable:
        if key in ("num_write", "num_read"):
            continue  # the builders' own exact counts (tests/domains/*/test_generator.py)
        space = _space(domain, key)
        result = run_pass(Ctx(store, space.run_id, 0, 0, get_domain(domain)), space, ColdStart(), 45)
        realized = {k.verdict.observed[key][0] for k in result.kept
                    if k.task.requested.get(key) == k.verdict.observed.get(key)}
        missing += [f"{key}={v}" for v in PROPERTIES[key].values if v not in realized]
    assert not missing, f"{domain}: no verified task realizes {missing}"
