from tests.flows.test_cli import evosyn


def test_envs_list_and_show(tmp_path):
    out = evosyn("envs", "list", home=tmp_path)
    assert out.stdout.split() == ["airline", "car_bench", "retail", "telecom"]
    out = evosyn("envs", "show", "airline", home=tmp_path)
    assert out.returncode == 0
    assert "book_reservation" in out.stdout and "write" in out.stdout and "Cancel flight" in out.stdout


def test_unknown_domain_is_one_line(tmp_path):
    out = evosyn("envs", "show", "bank", home=tmp_path)
    assert out.returncode == 2
    assert out.stderr == "error: envs show bank: unknown domain (known domains: airline, car_bench, retail, telecom)\n"


def test_verify_official_airline(tmp_path):
    out = evosyn("verify", "--domain", "airline", "--official", home=tmp_path)
    assert out.returncode == 0, out.stdout[-2000:]
    assert "│ passed  │ 43" in out.stdout and "│ skipped │ 7" in out.stdout
    for tid in ("0", "10", "26", "28", "31", "34", "46"):
        assert f"│ {tid} " in out.stdout
