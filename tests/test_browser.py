"""JupyterLab in a real browser: the login page without the token; with it, the course index and
notebook 00 run top to bottom in headless Chromium, and the row count shows up in the output.

The server is `make lab`'s command line (same flags, the same venv with its JupyterLab
settings overrides, a known token, a free port). Its root is a copy of notebooks/ in a
temporary folder, and its user settings live in a temporary folder with autosave off, so that
running notebook 00 in the browser can never rewrite the committed notebook. Chromium is
Debian's (/usr/bin/chromium) driven by Playwright; no browser is downloaded. A screenshot is
saved under $DELTALAB_ARTIFACTS (default: <repo>/.artifacts) and its path printed.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from course_testing import require

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
]
NOTEBOOK = "00_hello_delta.ipynb"
RUN_TIMEOUT_MS = 300_000


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _artifacts() -> Path:
    directory = Path(os.environ.get("DELTALAB_ARTIFACTS") or REPO / ".artifacts")
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@pytest.fixture
def jupyterlab(tmp_path):
    """`make lab` on a free port with a known token; yields (base URL, token); stopped by pid."""
    jupyter = Path(sys.executable).with_name("jupyter")
    require(jupyter.exists(), f"no jupyter next to {sys.executable} (run make setup)")
    root = tmp_path / "course"
    shutil.copytree(REPO / "notebooks", root / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    settings = tmp_path / "lab-settings"
    (settings / "@jupyterlab" / "docmanager-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "docmanager-extension" / "plugin.jupyterlab-settings").write_text(
        json.dumps({"autosave": False}))
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false"}))  # no "news?" pop-up over the screenshot
    (settings / "@jupyterlab" / "notebook-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings").write_text(
        json.dumps({"windowingMode": "none"}))  # every cell in the DOM, so its output can be found
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(settings), JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "ws"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), DELTALAB_NO_BROWSER="1")
    env.pop("JUPYTER_TOKEN", None)
    log_path = tmp_path / "jupyterlab.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [str(jupyter), "lab", "--ip=127.0.0.1", f"--port={port}", f"--ServerApp.root_dir={root}",
             f"--IdentityProvider.token={token}", "--no-browser", "notebooks/README.md"]
            + (["--allow-root"] if os.geteuid() == 0 else []),  # CI runs as root; jupyter refuses that otherwise
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if server.poll() is not None:
                pytest.fail(f"JupyterLab exited with {server.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                urllib.request.urlopen(f"{base}/api", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not answer on {base}:\n{log_path.read_text()[-3000:]}")
                time.sleep(0.5)
        yield base, token
    finally:
        server.send_signal(signal.SIGTERM)  # by pid: jupyter shuts its kernels down on SIGTERM
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)
        try:  # a kernel or its Spark JVM that outlived the server (the group is this test's own)
            os.killpg(server.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@pytest.fixture
def browser_page(tmp_path):
    require(CHROMIUM.exists(), "Debian's chromium is not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(False, "playwright is not installed (pip install playwright, from the test extra)")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_FLAGS, viewport={"width": 1400, "height": 1000})
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()


def test_jupyterlab_login_course_index_and_notebook_00(jupyterlab, browser_page):
    base, token = jupyterlab
    page = browser_page
    artifacts = _artifacts()

    # Without the token: the login page, asking for it.
    page.goto(f"{base}/lab", wait_until="domcontentloaded")
    assert "/login" in page.url, f"without the token JupyterLab should redirect to /login, got {page.url}"
    page.locator("#password_input").wait_for(timeout=30_000)
    assert "token" in page.content().lower(), "the login page should ask for the token"

    # With the token: the course index, rendered (make lab's Markdown-preview default).
    page.goto(f"{base}/lab/tree/notebooks/README.md?token={token}", wait_until="domcontentloaded")
    index = page.locator(".jp-RenderedMarkdown").filter(has_text="The course, notebook by notebook")
    index.first.wait_for(timeout=120_000)
    assert page.get_by_role("link", name="Hello, Delta Lake").count() > 0, "the index links notebook 00"

    # Notebook 00: clear the stored outputs, run all cells, find the row count in the new output.
    page.goto(f"{base}/lab/tree/notebooks/{NOTEBOOK}", wait_until="domcontentloaded")
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    panel.locator(".jp-Cell").first.wait_for(timeout=120_000)
    page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for(
        state="attached", timeout=120_000)
    _menu(page, "Edit", "Clear Outputs of All Cells")
    outputs = panel.locator(".jp-OutputArea-output")
    page.wait_for_function("() => document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output').length === 0",
                           timeout=30_000)
    assert outputs.count() == 0, "the stored outputs should be gone before the run"

    started = time.monotonic()
    _menu(page, "Run", "Run All Cells")
    row_count = panel.locator(".jp-OutputArea-output").filter(has_text="Read back 10 rows.")
    row_count.first.wait_for(state="attached", timeout=RUN_TIMEOUT_MS)
    versions = panel.locator(".jp-Cell").last.locator(".jp-OutputArea-output").filter(has_text="Checked with: Spark 4.2.0")
    versions.first.wait_for(state="attached", timeout=RUN_TIMEOUT_MS)
    seconds = time.monotonic() - started
    errors = panel.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    assert errors.count() == 0, f"notebook 00 printed errors in the browser: {errors.all_inner_texts()[:3]}"
    assert "The log says the table has 10 rows in 2 files." in panel.inner_text(), "the log's row count is shown"

    row_count.first.scroll_into_view_if_needed()
    screenshot = artifacts / "browser-00_hello_delta.png"
    page.screenshot(path=str(screenshot), full_page=False)
    assert screenshot.stat().st_size > 10_000, "the screenshot is empty"
    print(f"\nbrowser test: notebook 00 ran in {seconds:.0f} s in Chromium; screenshot: {screenshot}")


def _menu(page, menu: str, item: str) -> None:
    """Click an item of JupyterLab's main menu, as a person would."""
    page.locator(".lm-MenuBar-itemLabel", has_text=menu).first.click()
    page.locator(".lm-Menu-item:not(.lm-mod-disabled)").filter(
        has=page.locator(".lm-Menu-itemLabel", has_text=item)).first.click()
