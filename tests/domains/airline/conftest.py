import pytest


@pytest.fixture(scope="session")
def space():
    from evosyn.envs.ontology import load_initial_space
    from evosyn.envs.packs import get_pack

    return load_initial_space(get_pack("airline"), run_id="t")
