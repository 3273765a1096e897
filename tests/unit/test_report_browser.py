"""``lakecep report`` in a real headless browser (Debian's Chromium driven by Playwright):
every plot renders, the console stays clean, no request leaves file:// and the Data Docs
link opens the index. One browser start for the whole module.

Chromium comes from ``infra/bootstrap.sh`` (apt, as root); Playwright never downloads a
browser of its own here (``executable_path``). Skipped only when no chromium binary exists.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from report_lake import build_lake

from lakecep.config import load_settings
from lakecep.report import build

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium"
                                        if Path("/usr/bin/chromium").exists() else None)
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary: install Debian's (`apt-get install -y "
    "chromium`; infra/bootstrap.sh does it when run as root)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS,
                                              timeout=60_000)
        try:
            yield chromium
        finally:
            chromium.close()


class _Visit:
    """A page with everything it requested and every console error and page error."""

    def __init__(self, browser: Any) -> None:
        self.context = browser.new_context()
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.context.on("request", lambda request: self.requests.append(request.url))
        self.page = self.context.new_page()
        self.page.on("console", lambda message: message.type == "error"
                     and self.errors.append(message.text))
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))

    def open(self, path: Path) -> Any:
        self.page.goto(path.as_uri(), wait_until="load")
        return self.page


def _plots(page: Any) -> list[dict[str, Any]]:
    return page.eval_on_selector_all(
        "img", "imgs => imgs.map(i => ({alt: i.alt, complete: i.complete, "
        "width: i.naturalWidth, height: i.naturalHeight, "
        "shown: i.getBoundingClientRect().width, src: i.src.slice(0, 22)}))")


def test_the_report_renders_offline_in_chromium(browser: Any, tmp_path: Path) -> None:
    home = tmp_path / "home"
    build_lake(home)
    report = build(load_settings({"LAKECEP_HOME": str(home)}))
    visit = _Visit(browser)
    page = visit.open(report.path)

    plots = _plots(page)
    assert len(plots) == sum(s.plots for s in report.sections) == 5
    for plot in plots:
        assert plot["complete"] and plot["width"] > 0 and plot["height"] > 0, plot
        assert plot["shown"] > 0 and plot["src"] == "data:image/png;base64,", plot
    # inline SVG (none today): each must draw something
    boxes = page.eval_on_selector_all("svg", "svgs => svgs.map(s => { const b = s.getBBox(); "
                                      "return b.width * b.height; })")
    assert all(area > 0 for area in boxes), boxes
    headings = page.eval_on_selector_all("section h2", "hs => hs.map(h => h.textContent)")
    assert headings[:3] == ["Tables", "Complex events over time", "Detection latency"]
    assert page.inner_text("#latency table").count("rfid_") == 2

    # the Data Docs link is relative and opens the index on disk
    href = page.get_attribute("a.data-docs", "href")
    assert href == "data_docs/index.html"
    page.click("a.data-docs")
    page.wait_for_load_state("load")
    assert page.url == (home / "reports/data_docs/index.html").as_uri()
    assert page.inner_text("body") == "Data Docs"

    assert visit.errors == []
    left = [url for url in visit.requests if not url.startswith(("file://", "data:"))]
    assert left == [] and report.path.as_uri() in visit.requests, visit.requests
    visit.context.close()


def test_an_empty_home_renders_without_plots(browser: Any, tmp_path: Path) -> None:
    report = build(load_settings({"LAKECEP_HOME": str(tmp_path / "fresh")}))
    visit = _Visit(browser)
    page = visit.open(report.path)
    assert _plots(page) == []
    text = page.inner_text("#complex-events")
    assert "not produced yet: run lakecep run gold" in text
    assert page.eval_on_selector_all("section", "s => s.length") == 9
    assert visit.errors == []
    assert all(url.startswith("file://") for url in visit.requests), visit.requests
    # control: the recorders do see a request that leaves file:// and its console error
    control = tmp_path / "control.html"
    control.write_text('<img src="http://127.0.0.1:9/x.png">')
    visit.open(control)
    assert "http://127.0.0.1:9/x.png" in visit.requests
    assert any("Failed to load resource" in error for error in visit.errors), visit.errors
    visit.context.close()
