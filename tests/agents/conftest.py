import pytest

from envs.ontology import load_initial_space
from storage.records import Factor

BUCKETS = ["0", "1", "2", "3-4", "5+"]


@pytest.fixture(scope="session")
def space():
    return load_initial_space("airline", run_id="t")


def with_factor(space, key, values=BUCKETS):
    return space.model_copy(update={"version": space.version + 1, "factors": space.factors + [
        Factor(key=key, values=list(values), status="experimental", observable=True, added_in=space.version + 1)]})


@pytest.fixture(scope="session")
def roles():
    from agents.generator import EmbeddedGenerator
    from agents.repair import EmbeddedRepair
    from agents.teacher import EmbeddedTeacher
    from envs.packs import get_domain

    dom = get_domain("airline")
    teacher = EmbeddedTeacher(dom)
    return EmbeddedGenerator(dom), teacher, EmbeddedRepair(dom, teacher)
