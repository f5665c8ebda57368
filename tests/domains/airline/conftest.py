import pytest


@pytest.fixture(scope="session")
def space():
    from evosyn.envs.ontology import load_initial_space

    return load_initial_space("airline", run_id="t")
