import pytest

from evosyn.envs import packs
from evosyn.envs.packs import DomainPack, known, register
from evosyn.flows.cli import UserError
from evosyn.flows.compile import check_domain
from tests.flows.test_cli import evosyn


def test_the_empty_domain_is_the_default_pack():
    assert check_domain("") == check_domain(None) == packs.default_domain()


def test_unknown_and_environmentless_domains_are_one_line(monkeypatch):
    with pytest.raises(UserError, match=r"^--domain bank: unknown domain \(known domains: airline, car_bench, retail, telecom\)$"):
        check_domain("bank")
    known()
    monkeypatch.setattr(packs, "_PACKS", dict(packs._PACKS))

    class SpaceOnly(DomainPack):
        name = "space_only"

    packs.register(SpaceOnly())
    with pytest.raises(UserError, match="--domain space_only: unknown domain"):  # a space, no environment
        check_domain("space_only")


def test_a_domain_without_generator_is_refused_when_synthesizing(monkeypatch):
    known()
    monkeypatch.setattr(packs, "_PACKS", dict(packs._PACKS))

    class Bare(DomainPack):
        name = "bare"

        def environment(self):
            raise AssertionError("not built by a check")

    register(Bare())
    assert check_domain("bare") == "bare"
    with pytest.raises(UserError, match=r"--domain bare: task_builder: the embedded backend has no generator for this domain yet "
                                        r"\(domains with one: airline"):
        check_domain("bare", generator=True)


def test_run_with_an_unknown_domain_is_refused_before_any_work(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("domain: airlines\nrounds: 1\n")
    out = evosyn("run", "--config", str(cfg), home=tmp_path / "h")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert out.stderr.startswith("error: --domain airlines: unknown domain (known domains: airline, ")
    assert not (tmp_path / "h").exists()


def test_env_data_sets_a_domains_data_folder_and_a_wrong_one_is_one_line_before_any_work(tmp_path):
    import shutil

    from evosyn.envs.car_bench.data import FIXTURE
    from evosyn.envs.packs import get_domain
    from evosyn.flows.inputs import use_env_data
    from evosyn.config import ConfigError, RunConfig
    from evosyn.tasks.testset import test_set_run_id

    copy = tmp_path / "car-bench-data"
    shutil.copytree(FIXTURE, copy)
    default_set = test_set_run_id(get_domain("car_bench"))
    try:
        use_env_data(RunConfig(domain="car_bench", env_data={"car_bench": str(copy)}))
        assert get_domain("car_bench").root == copy.resolve()
        assert test_set_run_id(get_domain("car_bench")) != default_set  # runs on two data folders never share a test set
        with pytest.raises(ConfigError, match=r"^invalid config: field env_data.airline: domain 'airline' reads no"):
            use_env_data(RunConfig(domain="airline", env_data={"airline": str(copy)}))
        with pytest.raises(ConfigError, match=r"^invalid config: field 'env_data': unknown domain 'bank'"):
            use_env_data(RunConfig(domain="airline", env_data={"bank": str(copy)}))
    finally:
        use_env_data(RunConfig(domain="car_bench"))  # every domain on its own data again
    assert get_domain("car_bench").root == FIXTURE and test_set_run_id(get_domain("car_bench")) == default_set
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"domain: car_bench\nrounds: 1\nenv_data: {{car_bench: {tmp_path / 'nowhere'}}}\n")
    out = evosyn("run", "--config", str(cfg), home=tmp_path / "h")
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith(f"error: invalid config: field env_data.car_bench: {tmp_path / 'nowhere'} is not a "
                                 "CAR-bench data folder (expected mock_data/navigation/ and tasks/ under it)")
    assert not (tmp_path / "h").exists()
    good = tmp_path / "synth.yaml"
    good.write_text(f"env_data: {{car_bench: {copy}}}\n")
    out = evosyn("synth", "--domain", "car_bench", "--n", "2", "--config", str(good), "--quiet", home=tmp_path / "h")
    assert out.returncode == 0, out.stderr
    assert "run synth-car_bench-s0-n2-d" in out.stdout  # a pass on another data folder has its own id
