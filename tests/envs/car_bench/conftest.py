import json

import pytest

from evosyn.envs.car_bench.data import FIXTURE
from evosyn.envs.car_bench.domain import CarBenchDomain


@pytest.fixture(scope="session")
def car():
    """The CAR-bench environment on the bundled fixture (whatever $EVOSYN_CARBENCH_DATA says), bound to its pack
    as the registry binds the environments it builds."""
    from evosyn.envs.packs import get_pack

    env = CarBenchDomain(data_root=FIXTURE)
    env.bind_pack(get_pack("car_bench"))
    return env


def call(episode, name, **arguments):
    """One tool call: its observation parsed (plain text stays text) and its error flag."""
    obs = episode.step(name, arguments)
    try:
        return json.loads(obs.content), obs.error
    except ValueError:
        return obs.content, obs.error
