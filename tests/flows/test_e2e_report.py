"""`evosyn report` as a reader sees it: the HTML file opened in headless Chromium renders its plots, the
evolution trace, the legend and the sample chats.

Same requirements and skip rule as tests/flows/test_e2e_ui.py (``chromium``, ``chromium-driver``,
``selenium``; ``EVOSYN_REQUIRE_E2E`` turns a skip into a failure). Screenshots go to
``$EVOSYN_TEST_ARTIFACTS`` (default: the test's tmp dir).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.flows.test_e2e_ui import Page, _browser_or_skip

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
RUN = "e2e-report"


def _report(home: Path, out: Path) -> Path:
    """A real 3-round run (round_flow's stages, tests/tasks/driver.py), then `evosyn report` on it."""
    from click.testing import CliRunner

    from evosyn.flows.cli import main
    from evosyn.storage.records import Run
    from evosyn.storage.store import Store
    from tests.tasks import driver

    store = Store(home)
    driver.run(store, run_id=RUN, rounds=3, budget=16)
    store.write([Run(run_id=RUN, round=0, domain="airline", rounds=3, budget=16, status="finished")], "run")
    res = CliRunner().invoke(main, ["--home", str(home), "report", RUN, "--output", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return out / "report.html"


def _shown(page: Page, anchor: str, name: str) -> str:
    """Scroll the section into view, screenshot it, and return its visible text."""
    el = page.driver.find_element("id", anchor)
    page.driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", el)
    page.driver.save_screenshot(str(page.shots / f"{name}.png"))
    assert el.is_displayed() and el.size["height"] > 50, f"section {anchor} is not displayed"
    return el.text


def test_report_renders_plots_trace_and_legend_in_a_browser(tmp_path):
    _browser_or_skip()
    shots = Path(os.environ.get("EVOSYN_TEST_ARTIFACTS") or tmp_path / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    html_file = _report(tmp_path / "home", tmp_path / "report")
    page = Page(shots)
    try:
        page.open(html_file.as_uri(), [f"EvoSyn report: {RUN}", "Success over rounds", "Evolution trace", "Legend"],
                  "report-top")
        images = page.driver.execute_script(
            "return Array.from(document.images).map(i => [i.alt, i.complete, i.naturalWidth, i.naturalHeight]);")
        alts = [alt for alt, *_ in images]
        assert {"success over rounds", "per-slice success over rounds", "allocation over factor values",
                "failure rate per probe bucket"} <= set(alts), alts
        for alt, complete, width, height in images:  # every plot decoded: a broken data URI has naturalWidth 0
            assert complete and width > 200 and height > 100, (alt, width, height)
        trace = _shown(page, "trace", "report-trace")
        assert "1 -> 2" in trace and "2 -> 3" in trace and "3 -> 4" not in trace
        legend = _shown(page, "legend", "report-legend")
        for label in ("test success", "trajectory diversity (own)", "factor coverage", "what it measures", "better"):
            assert label in legend, label
        chats = page.driver.find_elements("css selector", "#samples details[open] .chat")
        assert len(chats) > 1 and all(c.is_displayed() for c in chats)
        text = _shown(page, "samples", "report-samples")
        assert "user's goal:" in text and "tool result" in text and "\u2192 " in text  # a tool call, rendered
        # nothing was fetched from outside: every resource the page loaded is a data URI or the file itself
        urls = page.driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name);")
        assert all(u.startswith(("data:", "file:")) for u in urls), urls
    finally:
        page.close()
