"""`evosyn bench llm`: one row set per concurrency, the warm rerun makes no request."""
import json

from tests.flows.test_cli import evosyn


def test_bench_llm_measures_each_concurrency(tmp_path):
    target = tmp_path / "llm.json"
    out = evosyn("bench", "llm", "--calls", "24", "--concurrency", "4,16", "--latency", "0.01",
                 "--output", str(target), home=tmp_path)
    assert out.returncode in (0, 1), out.stderr  # 1: a throughput target missed on a busy machine
    data = json.loads(target.read_text())
    assert [r["concurrency"] for r in data["runs"]] == [4, 16] and [r["target"] for r in data["runs"]] == [0.95, 0.95]
    for r in data["runs"]:
        assert r["valid_outputs"] == 24 and r["cold_http_requests"] == 24
        assert r["warm_http_requests"] == 0 and r["warm_cache_hits"] == 24 and r["warm_identical"]
        assert r["server_max_in_flight"] <= r["concurrency"]
        assert r["floor_s"] > 0 and 0 < r["floor_efficiency"] and r["floor_cpu_ms_per_call"] > 0
        assert r["raw_floor_s"] > 0 and 0 < r["raw_floor_efficiency"] and r["raw_floor_cpu_ms_per_call"] > 0
        assert r["client_work_cpu_ms_per_call"] > 0  # the client's own work, its transport answering in-process
    assert data["passed"] == all(r["passed"] for r in data["runs"])
    assert "at concurrency 16" in out.stdout and "bare aiohttp (floor)" in out.stdout
    assert "raw asyncio sockets (floor)" in out.stdout and "client work, no HTTP" in out.stdout


def test_bench_llm_refuses_a_bad_concurrency(tmp_path):
    out = evosyn("bench", "llm", "--concurrency", "64,x", home=tmp_path)
    assert out.returncode == 2 and out.stderr.startswith("error: --concurrency '64,x'")
