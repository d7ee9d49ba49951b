"""The web calculator in a real browser: `streamlit run app.py` as a subprocess, driven by
Debian's /usr/bin/chromium through Playwright for Python. Changes the batch, reads a changed
metric, checks the URL follows, and saves a screenshot under the test's tmp_path. One server and
one Chromium serve the module's tests; each test opens its own pages (its own sessions)."""

import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT
from servers import free_port, stop, wait_until_up

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

sync_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="/usr/bin/chromium is missing")


def streamlit_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "streamlit"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "streamlit"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One `streamlit run app.py` for the module's tests (each test opens its own pages, so
    each gets its own Streamlit sessions)."""
    tmp_path = tmp_path_factory.mktemp("streamlit")
    port = free_port()
    env = {**os.environ, "PERFMODEL_WEBAPP_UPLOADS": str(tmp_path / "uploads")}
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen(
        streamlit_cmd() + ["run", "app.py", "--server.headless", "true", "--server.address",
                           "127.0.0.1", "--server.port", str(port),
                           "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(proc, lambda: health_ok(url), name="streamlit", log=tmp_path / "server.log",
                      timeout_s=60)
        yield url
    finally:
        stop(proc)
        log.close()


@pytest.fixture(scope="module")
def browser():
    """One Chromium for the module's tests; each test opens its pages in new contexts."""
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield b
        finally:
            b.close()


def health_ok(url: str) -> bool:
    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
        return r.status == 200


def metric_value(page, label: str) -> str:
    box = page.locator('[data-testid="stMetric"]').filter(
        has=page.locator('[data-testid="stMetricLabel"]', has_text=re.compile(f"^{label}$")))
    return box.locator('[data-testid="stMetricValue"]').inner_text().strip()


def test_calculator_in_chromium(server, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1500, "height": 2000})
    try:
        page.goto(f"{server}/?batch=8&gpu=h100-sxm", timeout=60_000)
        page.wait_for_selector('[data-testid="stMetricValue"]', timeout=60_000)
        before = metric_value(page, "Aggregate")
        assert before.endswith("tok/s")
        box = page.get_by_role("spinbutton", name="Batch (sequences)")
        box.fill("64")
        box.press("Enter")
        deadline = time.time() + 30
        after = before
        while after == before and time.time() < deadline:
            time.sleep(0.3)
            after = metric_value(page, "Aggregate")
        number = lambda s: float(s.split()[0].replace(",", ""))
        assert number(after) > number(before), (before, after)
        page.wait_for_function("() => window.location.search.includes('batch=64')", timeout=10_000)
        time.sleep(1.5)                                   # let the charts draw
        shot = tmp_path / "calculator.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 20_000
        assert not page.locator('[data-testid="stException"]').count()
    finally:
        page.close()


PAGES = ["", "calculator", "sweep", "serving", "compare", "speculative", "claims",
         "calibration", "accuracy", "measure", "definitions"]


def test_every_page_opens_by_its_url(server, browser):
    # issue 15: a shared /calculator link opened a "Page not found" dialog, because the
    # default page is served at the root URL; every page must open cleanly by its own URL
    # one tab loads each URL in turn: every goto is a full load of that URL (a new document
    # and a new Streamlit session), as a pasted link is; a fresh context per page cost
    # Chromium ~2x the CPU here
    page = browser.new_page(viewport={"width": 1400, "height": 1200})
    try:
        for path in PAGES:
            page.goto(f"{server}/{path}", timeout=60_000)
            page.wait_for_selector('[data-testid="stMainBlockContainer"] '
                                   '[data-testid="stElementContainer"]', timeout=60_000)
            page.wait_for_function(   # the script run has finished
                "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                timeout=120_000)
            time.sleep(0.5)
            assert not page.get_by_text("Page not found").count(), path
            assert not page.locator('[role="dialog"]').count(), path
            assert not page.locator('[data-testid="stException"]').count(), path
    finally:
        page.close()


def set_number(page, label: str, value: int) -> None:
    box = page.get_by_role("spinbutton", name=label, exact=True)
    box.fill(str(value))
    box.press("Enter")


def test_attention_dp_in_chromium(server, browser):
    # issue 14: attention DP is reachable from the sidebar and the Calculator follows it as
    # perfmodel.api does for the same Query (DeepSeek-V3 fp8, 8 x H200: tp 4 x dp 2, EP 8)
    from perfmodel import api
    from perfmodel.core.query import make_query
    from perfmodel.core.units import MS
    from perfmodel.webapp.texts import num

    q = make_query(model="deepseek-v3", gpu="h200-sxm", weights="fp8", tp=4, dp=2, ep=8,
               batch=8, prompt_tokens=1024, output_tokens=256)
    want = f"{num(api.request_estimate(api.evaluate(q)).tpot_s / MS)} ms"
    page = browser.new_page(viewport={"width": 1500, "height": 2000})
    try:
        page.goto(f"{server}/?model=deepseek-v3&gpu=h200-sxm&weights=fp8&tp=4&ep=4&batch=8"
                  "&prompt=1024&output=256", timeout=60_000)
        page.wait_for_selector('[data-testid="stMetricValue"]', timeout=60_000)
        before = metric_value(page, "TPOT")
        set_number(page, "DP", 2)
        page.wait_for_function("() => window.location.search.includes('dp=2')", timeout=30_000)
        set_number(page, "EP", 8)
        page.wait_for_function("() => window.location.search.includes('ep=8')", timeout=30_000)
        deadline = time.time() + 30
        got = before
        while got != want and time.time() < deadline:
            time.sleep(0.3)
            got = metric_value(page, "TPOT") if page.locator('[data-testid="stMetric"]').count() else got
        assert got == want != before, (before, got, want)
        assert not page.locator('[data-testid="stException"]').count()
    finally:
        page.close()
