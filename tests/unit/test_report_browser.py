"""`gpuinfra report --html` in a real headless browser: Debian's chromium through Selenium.

The pages are those of tests/report_fixtures.py (a real run of the verify suite on the broken
lab, with the matrices test_gpu records added by its own code; the healthy page leaves the
broken worker out). Each page is loaded from a file, queried through the DOM (the verdict, the
matrices, the grouped cause), screenshot into docs/img/ (committed, shown in README.md) and
must log no JavaScript error (browser log level SEVERE: none).

chromium and chromedriver come from Debian (`make test-tools` installs them); Selenium is told
the driver's path, so Selenium Manager never downloads one. Without them this test skips
saying so, or fails when GPUINFRA_REQUIRE_TOOLS is set (as `make test` does).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuinfra_verify import report
from gpuinfra_verify.report_html import render_html
from tests.report_fixtures import lab_junit, lab_spec

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "docs" / "img"
CHROMEDRIVER = "/usr/bin/chromedriver"


def _missing(message: str) -> None:
    message += ": `make test-tools` installs Debian's chromium and chromium-driver"
    if os.environ.get("GPUINFRA_REQUIRE_TOOLS"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _missing("selenium is not installed (pip install -e '.[test]')")
    chromium = shutil.which("chromium")
    if chromium is None or not Path(CHROMEDRIVER).is_file():
        _missing(f"chromium or {CHROMEDRIVER} not found")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1500", "--hide-scrollbars"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _page(tmp_path: Path, healthy: bool) -> Path:
    built = report.build(lab_spec(healthy), report.read_junit(lab_junit(healthy)),
                         "lab-broken-verify.xml" + (" (lab-worker3 left out)" if healthy else ""))
    page = tmp_path / f"report-{'healthy' if healthy else 'broken'}.html"
    page.write_text(render_html(built), encoding="utf-8")
    return page


def _load(driver: object, page: Path, shot: str) -> None:
    driver.get(page.as_uri())  # type: ignore[attr-defined]
    SHOTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.body.scrollHeight")  # type: ignore
    driver.set_window_size(1280, min(max(int(height), 800), 4000))  # type: ignore
    assert driver.save_screenshot(str(SHOTS / shot))  # type: ignore[attr-defined]


def _severe(driver: object) -> list[dict]:
    return [e for e in driver.get_log("browser")  # type: ignore[attr-defined]
            if e.get("level") == "SEVERE"]


def test_healthy_page(browser: object, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    _load(browser, _page(tmp_path, healthy=True), "report-healthy.png")
    find = browser.find_elements  # type: ignore[attr-defined]
    verdict = browser.find_element(By.ID, "verdict")  # type: ignore[attr-defined]
    assert verdict.get_attribute("data-verdict") == "pass"
    assert "Cluster verdict: PASS" in verdict.text
    nodes = find(By.CSS_SELECTOR, "article.node")
    assert [n.get_attribute("data-node") for n in nodes] == ["lab-head", "lab-worker1",
                                                           "lab-worker2"]
    nvlink = find(By.CSS_SELECTOR, "#node-lab-worker1 table[data-matrix=nvlink]")
    assert len(nvlink) == 1
    assert len(nvlink[0].find_elements(By.CSS_SELECTOR, "td.ok")) == 56  # 8x8 less self
    assert len(find(By.CSS_SELECTOR, "#node-lab-worker1 table[data-matrix=p2p-r] td.ok")) == 56
    assert not find(By.CSS_SELECTOR, "td.bad")
    assert not find(By.CSS_SELECTOR, "li.cause")
    assert _severe(browser) == []


def test_broken_page(browser: object, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    _load(browser, _page(tmp_path, healthy=False), "report-broken.png")
    find = browser.find_elements  # type: ignore[attr-defined]
    verdict = browser.find_element(By.ID, "verdict")  # type: ignore[attr-defined]
    assert verdict.get_attribute("data-verdict") == "fail"
    broken = browser.find_element(By.ID, "node-lab-worker3")  # type: ignore[attr-defined]
    assert broken.get_attribute("data-verdict") == "fail"
    # the NVLink matrix: the bridged pair red, expected and seen, its cause on hover and below
    bad = broken.find_elements(By.CSS_SELECTOR, "table[data-matrix=nvlink] td.bad")
    assert [c.get_attribute("data-pair") for c in bad] == ["GPU0-GPU1", "GPU0-GPU1"]
    assert "PIX" in bad[0].text and "want NV>=12" in bad[0].text
    assert "NVLink bridge not detected" in bad[0].get_attribute("title")
    assert len(broken.find_elements(By.CSS_SELECTOR, "table[data-matrix=p2p-r] td.bad")) == 2
    # each cause once, with the subjects it explains and its fix
    causes = find(By.CSS_SELECTOR, "#causes li.cause")
    texts = [c.find_element(By.CSS_SELECTOR, ".cause-text").text for c in causes]
    assert sum(t.startswith("NVLink bridge not detected") for t in texts) == 1
    first = causes[0]
    assert "lab-worker3 GPU0-GPU1" in first.find_element(By.CSS_SELECTOR, ".where").text
    assert "reseat the NVLink bridge" in first.find_element(By.CSS_SELECTOR, ".fix").text
    # the healthy nodes still pass, and nothing is fetched or run by the page
    assert [n.get_attribute("data-verdict") for n in find(By.CSS_SELECTOR, "article.node")
            ].count("pass") == 3
    assert not find(By.CSS_SELECTOR, "script, link, img")
    assert _severe(browser) == []
