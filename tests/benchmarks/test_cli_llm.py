"""`evosyn bench llm`: throughput against the bound, the 429s met when the rpm limit binds, no request on a rerun."""
import json

from tests.flows.test_cli import evosyn


def test_bench_llm_measures_each_concurrency_against_its_bound(tmp_path):
    target = tmp_path / "llm.json"
    # concurrency 2 at 0.3 s: about 7 calls a second, under the 600 rpm limit (10 a second);
    # concurrency 12: about 40 a second wanted, so the limit binds and the first wave meets 429s
    out = evosyn("bench", "llm", "--calls", "30", "--concurrency", "2,12", "--latency", "0.3", "--sigma", "0.3",
                 "--rpm", "600", "--output", str(target), home=tmp_path)
    assert out.returncode in (0, 1), out.stderr  # 1: the throughput target missed on a busy machine
    data = json.loads(target.read_text())
    assert data["benchmark"] == "llm-openai_compatible" and "machine" in data
    low, high = data["runs"]
    assert (low["concurrency"], low["binding"], high["concurrency"], high["binding"]) == (2, "concurrency", 12, "rpm")
    for r in data["runs"]:
        assert r["failed_calls"] == 0 and r["valid_outputs"] == 30 and r["target"] == 0.95
        assert r["warm_http_requests"] == 0 and r["warm_cache_hits"] == 30 and r["warm_identical"]
        assert r["cold_http_requests"] == 30 + r["rate_limited"] and r["server_max_in_flight"] <= r["concurrency"]
        assert 0.2 < r["served_mean_latency_s"] < 0.4 and r["of_bound"] > 0.5 and 0.5 < r["of_ideal"] < 1.1
        assert r["passed"] == (r["of_bound"] >= 0.95)
    assert low["rate_limited"] == 0 and high["rate_limited"] >= 2  # 12 at once against a bucket of 10
    assert abs(low["bound_calls_per_s"] - 2 / low["served_mean_latency_s"]) < 1e-9
    assert high["bound_calls_per_s"] == 10.0
    assert data["passed"] == all(r["passed"] for r in data["runs"])
    assert "at concurrency 12" in out.stdout and "429s met" in out.stdout and "warm cache (rerun)" in out.stdout
    assert "raw asyncio sockets" not in out.stdout and "client work, no HTTP" not in out.stdout


def test_bench_llm_refuses_a_bad_concurrency(tmp_path):
    out = evosyn("bench", "llm", "--concurrency", "64,x", home=tmp_path)
    assert out.returncode == 2 and out.stderr.startswith("error: --concurrency '64,x'")
