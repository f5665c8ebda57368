import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evosyn.envs import packs
from evosyn.envs.packs import DomainPack, UnknownDomain, default_domain, get_domain, get_pack, known, register

ROOT = Path(__file__).resolve().parents[2]
CORE = ("storage", "config", "envs", "agents", "tasks", "flows", "benchmarks", "deployments")
DOMAIN_WORDS = re.compile(r"airline|retail|telecom", re.I)
# measurements taken on a named domain, and the page written from them: data, not code
RECORDED = (ROOT / "benchmarks" / "results", ROOT / "benchmarks" / "RESULTS.md")


BUILT_IN = sorted(p.parent.name for p in (ROOT / "domains").glob("*/__init__.py") if not p.parent.name.startswith("_"))


def test_known_domains_are_the_pack_folders():
    """Read from the folders, so adding a pack adds a domain without editing this test."""
    assert known() == BUILT_IN and "airline" in BUILT_IN
    runnable = known(with_environment=True)
    assert set(runnable) == {n for n in BUILT_IN if get_pack(n).has_environment}
    assert "car_bench" in runnable  # an environment family of its own


def test_unknown_domain_lists_known_ones():
    with pytest.raises(UnknownDomain, match=f"unknown domain 'bank'; known domains: {', '.join(BUILT_IN)}$"):
        get_domain("bank")


def test_registry_refuses_duplicates_and_nameless_packs(monkeypatch):
    known()  # the packs are loaded
    monkeypatch.setattr(packs, "_PACKS", dict(packs._PACKS))

    class Again(DomainPack):
        name = "airline"

    with pytest.raises(ValueError, match="domain 'airline' is already registered"):
        register(Again())
    with pytest.raises(ValueError, match="needs a name"):
        register(DomainPack())


def test_exactly_one_default(monkeypatch):
    assert default_domain() == "airline"
    assert [n for n in known() if get_pack(n).default] == ["airline"]
    monkeypatch.setattr(packs, "_PACKS", dict(packs._PACKS))

    class Second(DomainPack):
        name, default = "second", True

    register(Second())
    with pytest.raises(packs.DefaultConflict, match=r"^default: 2 domain packs are the default, 'airline' \(.*"
                       r"domains/airline/pack.py:\d+\) and 'second' \(.*test_packs.py:\d+\); remove `default = True` "
                       r"from 'second' \(the default is 'airline'\) and pass --domain NAME to use another$"):
        default_domain()


def test_a_pack_without_environment_or_generator_says_so():
    class SpaceOnly(DomainPack):
        name = "space_only"

    bare = SpaceOnly()
    assert not bare.has_environment and not bare.has_generator
    with pytest.raises(packs.NoEnvironment, match="space_only"):
        bare.environment()
    assert get_pack("airline").has_generator and get_pack("car_bench").has_generator


def test_no_core_module_names_a_domain():
    """Only the packs under domains/ know a domain: no core file, prompt or deployment names one."""
    hits = []
    for layer in CORE:
        for path in sorted((ROOT / layer).rglob("*")):
            if any(path == r or r in path.parents for r in RECORDED):
                continue
            if path.suffix in (".py", ".md", ".json", ".yaml", ".yml", ".jinja", ".txt") and path.is_file():
                for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                    if DOMAIN_WORDS.search(line):
                        hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:80]}")
            elif path.is_file() and DOMAIN_WORDS.search(path.name):
                hits.append(f"{path.relative_to(ROOT)}: the file name")
    assert not hits, "\n".join(hits)


def test_prompt_templates_get_the_domain_as_a_variable():
    for path in sorted((ROOT / "agents" / "prompts").glob("*.md")):
        text = path.read_text()
        assert not DOMAIN_WORDS.search(text), path.name


def test_importing_a_domain_does_not_import_litellm():
    code = ("import sys; from evosyn.envs.packs import get_domain; d = get_domain('airline'); "
            "d.episode().step('get_user_details', {'user_id': 'mia_li_3668'}); "
            "print('litellm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


def test_registering_the_packs_loads_no_environment():
    code = ("import sys; from evosyn.envs.packs import known; known(); "
            "print(any(m.startswith('tau2') for m in sys.modules), 'evosyn.domains.airline.generator' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False False", out.stderr


@pytest.mark.parametrize("name, kinds", [
    ("airline", {"book_reservation": "write", "get_user_details": "read", "calculate": "generic",
                 "transfer_to_human_agents": "generic", "send_certificate": "write"}),
    ("retail", {"cancel_pending_order": "write", "find_user_id_by_email": "read"}),
])
def test_tool_types_come_from_tau2_tags(name, kinds):
    dom = get_domain(name)
    for tool, kind in kinds.items():
        assert dom.tool_kind(tool) == kind
    schema = dom.tool("get_user_details").openai_schema()
    assert schema["type"] == "function" and schema["function"]["parameters"]["required"] == ["user_id"]


def test_telecom_has_user_tools(telecom):
    assert {t.requestor for t in telecom.tools()} == {"assistant", "user"}
    assert telecom.tool_kind("toggle_airplane_mode", "user") is not None


def test_tool_error_is_an_observation(airline):
    obs = airline.episode().step("get_user_details", {"user_id": "nobody"})
    assert obs.error and obs.content.startswith("Error:")
    obs = airline.episode().step("no_such_tool", {})
    assert obs.error


def test_argument_validation(airline):
    assert airline.validate_arguments("get_user_details", {"user_id": "x"}) is None
    assert "unknown arguments" in airline.validate_arguments("get_user_details", {"user_id": "x", "z": 1})
    assert "do not match" in airline.validate_arguments("get_user_details", {})
    assert "no assistant tool" in airline.validate_arguments("fly", {})


def test_splits_and_summary(airline, retail, telecom):
    assert airline.splits()["base"] == 50 and len(airline.tasks("test")) == 20
    assert retail.splits()["base"] == 114 and telecom.splits()["base"] == 114
    s = airline.summary()
    assert s.entity_counts == {"flights": 300, "users": 500, "reservations": 2000}
    assert len(s.example_ids["users"]) == 3 and s.tools["cancel_reservation"] == "write"
    json.dumps(s.__dict__)
    with pytest.raises(KeyError, match="known: train, test, base"):
        airline.tasks("nope")


def test_tau2_packs_take_their_policy_from_the_pack_package():
    from evosyn.envs.tau2.pack import Tau2Pack

    tau2_packs = [get_pack(n) for n in known(with_environment=True) if isinstance(get_pack(n), Tau2Pack)]
    assert [p.name for p in tau2_packs] == ["airline", "retail", "telecom"]  # car_bench is its own family
    for pack in tau2_packs:
        assert pack.tau2_module.startswith("tau2.")
        policy = pack.policy_module()
        assert policy.__name__ == f"{type(pack).__module__.rsplit('.', 1)[0]}.policy"
        assert pack.policy_rules() is policy.check_write
        assert pack.official_waivers is policy.OFFICIAL_WAIVERS


def test_a_tau2_pack_without_module_says_so():
    from evosyn.envs.tau2.pack import Tau2Pack

    class Bare(Tau2Pack):
        name = "bare"

    assert Bare().has_environment
    with pytest.raises(ValueError, match="names no tau2_module"):
        Bare().environment()


def test_without_the_built_in_folder_every_lookup_fails(monkeypatch):
    from evosyn.envs import packs

    monkeypatch.setattr(packs, "_PACKS", {})
    monkeypatch.setattr(packs, "_loaded", False)
    monkeypatch.setattr(packs, "PACKAGE", "no_such_pack_folder")
    for _ in range(2):  # an install error, never a silently empty registry: the error comes back on each lookup
        with pytest.raises(ModuleNotFoundError):
            packs.known()


def test_user_folders_are_scanned_and_a_broken_pack_stops_no_other(tmp_path, user_registry):
    
    good, bad = tmp_path / "desk", tmp_path / "broken"
    for folder in (good, bad):
        folder.mkdir()
    (good / "__init__.py").write_text(
        "from evosyn.envs.packs import DomainPack, register\n"
        "from .names import NAME\n"  # a relative import: the folder is imported as a package
        "class Desk(DomainPack):\n    name = NAME\n"
        "register(Desk())\n")
    (good / "names.py").write_text("NAME = 'desk'\n")
    (bad / "__init__.py").write_text(
        "from evosyn.envs.packs import DomainPack, register\n"
        "class Broken(DomainPack):\n    name = 'broken'\n"
        "register(Broken())\n"
        "raise RuntimeError('half written')\n")
    (tmp_path / "again").mkdir()  # a second pack of a built-in name: refused, and the built-in one stays
    (tmp_path / "again" / "__init__.py").write_text(
        "from evosyn.envs.packs import DomainPack, register\nclass Again(DomainPack):\n    name = 'airline'\n"
        "register(Again())\n")
    user_registry(tmp_path)
    assert "desk" in known() and "airline" in known() and "broken" not in known()  # its registration undone
    # each with the pack's own line: the one that raised, the register call the registry refused
    assert packs.broken() == {"broken": f"RuntimeError at {bad / '__init__.py'}:5: half written",
                              "again": f"ValueError at {tmp_path / 'again' / '__init__.py'}:4: domain 'airline' is "
                                       "already registered"}
    assert type(get_pack("airline")).__module__.startswith(f"{packs.PACKAGE}.")
    with pytest.raises(packs.BrokenPack, match="domain 'broken' failed to load: RuntimeError at .*: half written"):
        get_pack("broken")
    assert type(get_pack("desk")).__module__ == f"{packs.USER_PACKAGE}.desk"


def test_the_default_user_folder_is_domains_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.delenv(packs.USER_FOLDERS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert packs.user_folders() == []  # no ./domains here
    (tmp_path / "domains").mkdir()
    assert packs.user_folders() == [(tmp_path / "domains").resolve()]
    monkeypatch.chdir(ROOT)  # the repository's root: ./domains is the built-in folder, scanned once
    assert packs.user_folders() == []


def test_the_registry_binds_each_environment_to_its_pack(airline):
    import copy

    assert airline.pack is get_pack("airline")  # bound by get_domain, never looked up by name again
    other, pack = copy.copy(airline), DomainPack()
    other.bind_pack(pack)
    assert other.pack is pack and airline.pack is get_pack("airline")
    assert packs.environment_of(get_pack("airline")) is airline  # the process-wide one, for a pack in hand


def test_an_environment_bound_to_no_pack_says_so_instead_of_looking_its_name_up():
    from evosyn.envs.base import Domain

    class Loose(Domain):
        name, policy = "airline", ""
        tools = validate_arguments = episode = tasks = splits = task_from_json = make_task = summary = \
            lambda self, *a, **k: None

    loose = Loose()
    with pytest.raises(RuntimeError, match="environment 'airline' is bound to no pack: .*bind_pack"):
        loose.pack  # noqa: B018 - the property is what raises
    loose.bind_pack(get_pack("airline"))
    assert loose.pack is get_pack("airline")


def test_tool_kind_is_part_of_the_interface():
    from evosyn.envs.base import Domain, EnvSummary, ToolSpec

    class Tiny(Domain):
        name, policy = "tiny", ""

        def tools(self, requestor=None):
            return [] if requestor == "user" else [ToolSpec("look", "read", "assistant", "", {}),
                                                   ToolSpec("act", "write", "assistant", "", {})]

        validate_arguments = episode = tasks = splits = task_from_json = make_task = \
            lambda self, *a, **k: None  # noqa: E731

        def summary(self):
            return EnvSummary(domain="tiny", entity_counts={}, example_ids={})

    tiny = Tiny()
    assert (tiny.tool_kind("look"), tiny.tool_kind("act"), tiny.tool_kind("nope")) == ("read", "write", None)
    assert tiny.tool_kind("act", "user") is None
