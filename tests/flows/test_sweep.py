"""`evosyn sweep`'s grid: domains x arms x seeds, the domains defaulting to every pack with an environment and a generator."""
import pytest

from evosyn.envs import packs
from evosyn.flows import sweep as S
from evosyn.config import ConfigError, RunConfig


class Runnable(packs.DomainPack):
    def environment(self):  # never called: the grid only needs to know that there is one
        raise AssertionError("the sweep grid must not load an environment")

    def task_builder(self, domain, prior):
        raise AssertionError("the sweep grid must not build a generator")


class NoGenerator(packs.DomainPack):
    def environment(self):
        raise AssertionError("the sweep grid must not load an environment")


class OntologyOnly(packs.DomainPack):
    pass


def pack(cls, name):
    p = cls()
    p.name = name
    return p


@pytest.fixture
def registry(monkeypatch):
    """Two runnable packs, one without a generator, one without an environment (names the config accepts)."""
    fake = {"telecom": pack(Runnable, "telecom"), "airline": pack(Runnable, "airline"),
            "retail": pack(OntologyOnly, "retail"),
            "car": pack(NoGenerator, "car")}
    monkeypatch.setattr(packs, "_PACKS", fake)
    monkeypatch.setattr(packs, "_loaded", True)
    return fake


def write(tmp_path, grid: str):
    path = tmp_path / "sweep.yaml"
    path.write_text("rounds: 1\nbudget: 4\ntest_size: 4\nsweep:\n" + grid)
    return str(path)


def test_no_domains_means_every_domain_with_an_environment(registry, tmp_path):
    assert S.sweep_domains([]) == S.sweep_domains(None) == ["airline", "telecom"]
    base, grid = S.load_sweep(write(tmp_path, "  arms: [evosyn, static]\n  seeds: [0, 1]\n"), str(tmp_path / "h"))
    assert grid == {"domains": ["airline", "telecom"], "arms": ["evosyn", "static"], "seeds": [0, 1]}
    assert base.store.root == str(tmp_path / "h")
    _, empty = S.load_sweep(write(tmp_path, "  domains: []\n"), None)
    assert empty["domains"] == ["airline", "telecom"] and empty["arms"] == ["evosyn"] and empty["seeds"] == [0]


def test_named_domains_are_kept_in_order(registry, tmp_path):
    _, grid = S.load_sweep(write(tmp_path, "  domains: [telecom, airline, telecom]\n"), None)
    assert grid["domains"] == ["telecom", "airline"]


def test_bad_grids_are_one_line_errors(registry, tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match=r"sweep\.domains': must be a list"):
        S.load_sweep(write(tmp_path, "  domains: airline\n"), None)
    with pytest.raises(ConfigError, match=r"sweep\.domain'"):
        S.load_sweep(write(tmp_path, "  domain: [airline]\n"), None)
    with pytest.raises(ConfigError, match="arm"):
        S.load_sweep(write(tmp_path, "  arms: [nonsense]\n"), None)
    monkeypatch.setattr(packs, "_PACKS", {})
    with pytest.raises(ConfigError, match="no domain to sweep"):
        S.load_sweep(write(tmp_path, "  arms: [evosyn]\n"), None)


def test_the_flow_runs_arms_x_seeds_x_every_domain(registry, monkeypatch):
    ran = []
    monkeypatch.setattr(S, "evosyn_run", lambda cfg, progress=None: ran.append((cfg.domain, cfg.arm, cfg.seed)) or cfg.domain)
    base = RunConfig(rounds=1, budget=4)
    out = S.sweep_flow.fn(base, domains=[], arms=["evosyn", "static"], seeds=[0, 1])
    assert ran == [(d, a, s) for d in ("airline", "telecom") for a in ("evosyn", "static") for s in (0, 1)]
    assert out == [d for d, _, _ in ran]
    assert all(c.rounds == 1 and c.budget == 4 for c in S.sweep_configs(base, ["telecom"], ["evosyn"], [3]))


def test_a_named_domain_must_be_runnable(registry, tmp_path):
    for name in ("bank", "retail", "car"):  # unknown, no environment, no generator: refused before any run
        with pytest.raises(ConfigError, match=rf"sweep\.domains': '{name}' is not a domain pack"):
            S.load_sweep(write(tmp_path, f"  domains: [airline, {name}]\n"), None)


def test_the_shipped_configs_store_where_home_or_evosyn_home_points(tmp_path, monkeypatch):
    """deployments/configs name no store root, so `--home` and EVOSYN_HOME decide where a run writes."""
    from pathlib import Path

    from evosyn.config import load_config

    configs = Path(__file__).resolve().parents[2] / "deployments" / "configs"
    monkeypatch.setenv("EVOSYN_HOME", str(tmp_path / "env-home"))
    base, _ = S.load_sweep(str(configs / "sweep.yaml"))
    assert Path(base.store_root()) == tmp_path / "env-home"
    base, _ = S.load_sweep(str(configs / "sweep.yaml"), str(tmp_path / "cli-home"))
    assert Path(base.store_root()) == tmp_path / "cli-home"
    assert Path(load_config(str(configs / "run.yaml")).store_root()) == tmp_path / "env-home"


def test_submit_and_deployment_are_sweep_options(registry, tmp_path):
    _, grid = S.load_sweep(write(tmp_path, "  domains: [airline]\n  submit: deployment\n"
                                           "  deployment: evosyn-run/on-k8s\n"), None)
    assert grid == {"domains": ["airline"], "arms": ["evosyn"], "seeds": [0], "submit": "deployment",
                    "deployment": "evosyn-run/on-k8s"}
    with pytest.raises(ConfigError, match=r"sweep\.submit': one of inline, deployment"):
        S.load_sweep(write(tmp_path, "  submit: dask\n"), None)
    with pytest.raises(ConfigError, match=r"sweep\.deployment': a 'flow/deployment' name"):
        S.load_sweep(write(tmp_path, "  deployment: evosyn-run\n"), None)


def test_submit_deployment_hands_every_cell_to_the_workers(registry, monkeypatch):
    handed = {}
    monkeypatch.setattr(S, "submit_cells", lambda cfgs, deployment, say: handed.update(cfgs=cfgs, dep=deployment)
                        or ["cells"])
    monkeypatch.setattr(S, "wait_cells", lambda cells, timeout, say: handed.update(timeout=timeout) or cells)
    monkeypatch.setattr(S, "crash_superseded", lambda cells, say: handed.update(checked=cells))
    monkeypatch.setattr(S, "evosyn_run", lambda *a, **k: pytest.fail("a cell ran in the sweep's process"))
    out = S.sweep_flow.fn(RunConfig(rounds=1), domains=["telecom"], arms=["evosyn", "static"], seeds=[1],
                          submit="deployment", deployment="evosyn-run/x", timeout=30.0)
    assert out == ["cells"] and handed["dep"] == "evosyn-run/x" and handed["timeout"] == 30.0
    assert handed["checked"] == ["cells"]  # the finished cells' stale flow runs are looked for
    assert [(c.domain, c.arm, c.seed) for c in handed["cfgs"]] == [("telecom", "evosyn", 1), ("telecom", "static", 1)]


def test_a_sweep_checks_each_domains_data_folder_before_any_run(tmp_path):
    from tests.flows.test_cli import evosyn

    path = write(tmp_path, "  domains: [car_bench]\n  arms: [evosyn]\n  seeds: [0]\n")
    with open(path, "a") as f:
        f.write(f"env_data: {{car_bench: {tmp_path / 'nowhere'}}}\n")
    out = evosyn("sweep", "--config", path, home=tmp_path / "h")
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("error: invalid config: field env_data.car_bench: ") and "nowhere" in out.stderr
    assert not (tmp_path / "h").exists()
