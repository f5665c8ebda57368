import pytest

from evosyn.envs.ontology import load_initial_space
from evosyn.envs.packs import get_domain
from evosyn.storage.records import Factor

BUCKETS = ["0", "1", "2", "3-4", "5+"]


@pytest.fixture(scope="session")
def airline():
    """The environment of the ``space`` fixture."""
    from evosyn.envs.packs import get_domain

    return get_domain("airline")


@pytest.fixture(scope="session")
def rules(airline):
    """The airline pack's planner rules, as ``build_roles`` hands them to the designer and the planner."""
    return airline.pack.planner_rules


@pytest.fixture(scope="session")
def space(airline):
    return load_initial_space(airline.pack, run_id="t")


def with_factor(space, key, values=BUCKETS):
    return space.model_copy(update={"version": space.version + 1, "factors": space.factors + [
        Factor(key=key, values=list(values), status="experimental", observable=True, added_in=space.version + 1)]})


@pytest.fixture(scope="session")
def roles():
    from evosyn.agents.generator import EmbeddedGenerator
    from evosyn.agents.repair import EmbeddedRepair
    from evosyn.agents.teacher import EmbeddedTeacher
    from evosyn.envs.packs import get_domain

    dom = get_domain("airline")
    teacher = EmbeddedTeacher(dom)
    return EmbeddedGenerator(dom), teacher, EmbeddedRepair(dom, teacher)


@pytest.fixture(scope="session")
def synth_pass(tmp_path_factory):
    """``synth_pass(space, n, seed=0, steering=None)``: one pass of the pipeline's stages, each in a fresh store."""
    from evosyn.agents.designer import ColdStart
    from evosyn.tasks.stages import Ctx
    from evosyn.tasks.synthesis import run_pass
    from evosyn.storage.store import Store

    def run(space, n, seed=0, steering=None):
        ctx = Ctx(Store(tmp_path_factory.mktemp("synth")), space.run_id, 0, seed, get_domain(space.domain))
        return run_pass(ctx, space, steering or ColdStart(), n)

    return run
