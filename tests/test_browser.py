"""JupyterLab in a real browser, as each person gets it: the learner's (`make lab`) and the
instructor's (`make instructor`).

- Learner: the login page without the token; with it, the course index, with none of nbgrader's
  instructor tools (no Nbgrader menu, no Create Assignment panel, no formgrader on the server) and
  no "official Jupyter news?" prompt; notebook 00 runs top to bottom and its row count shows up.
- Instructor: labs/README.md open in labs/, the Nbgrader menu and the Create Assignment panel, and
  the formgrader listing every lab of labs/source/.

Each server is what `make lab ROLE=<role>` runs: `python -m deltalab lab` with the same options
(a test below checks them against `make -n`), so the same deltalab.jupyterlab builds its command
line, environment and working directory (the role's Jupyter settings from
src/deltalab/jupyter/<role> first on JUPYTER_CONFIG_PATH, the venv's JupyterLab overrides), on a
free port with a known token in JUPYTER_TOKEN. One server per role serves all of that role's
tests. Its root is a copy of notebooks/ and of the committed part of labs/ in a temporary folder,
and its user settings live in a temporary folder with autosave off, so that the browser can never
rewrite a committed notebook and the gradebook the formgrader creates lands in the copy.
Chromium is Debian's (/usr/bin/chromium) driven by Playwright; no browser is downloaded.
Screenshots go to $DELTALAB_ARTIFACTS (default: <repo>/.artifacts) and their paths are printed.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from course_testing import artifacts, checkout_copy, ink, require
from deltalab.jupyterlab import JUPYTER_CONFIG_ENV, OPENS, WORKING_DIRS, lab_launch
from deltalab.processes import free_loopback_port

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
]
NOTEBOOK = "00_hello_delta.ipynb"
RUN_TIMEOUT_MS = 300_000
LOAD_TIMEOUT_MS = 120_000
KERNEL_IDLE = re.compile(r"Python 3 \(ipykernel\) \| Idle")  # the status bar, once the kernel is up

# The request JupyterLab's news plugin makes when it starts (for its config section).
NEWS_PLUGIN_CONFIG = "/api/config/jupyterlabapputilsextensionannouncements"
NEWS_PROMPT = "official Jupyter news"


@dataclass
class Lab:
    """A running JupyterLab of one role: where it answers, its token, its course copy, log and
    the work root its kernels write tables under (DELTALAB_WORKDIR)."""

    role: str
    base: str
    token: str
    root: Path
    log: Path
    work: Path
    served: Path


@dataclass
class BrowserTab:
    """A browser tab with every URL it requested, so a test can say what the page never loaded."""

    tab: object
    requests: list[str] = field(default_factory=list)


def _user_settings(settings: Path) -> None:
    """Test-only user settings: no autosave, and every cell in the DOM so its output can be found.
    Nothing about news or nbgrader: that must come from the role's configuration."""
    for plugin, values in {
        "docmanager-extension/plugin": {"autosave": False},
        "notebook-extension/tracker": {"windowingMode": "none"},
    }.items():
        path = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


def _wait_until_serving(server: subprocess.Popen, base: str, log_path: Path) -> None:
    deadline = time.monotonic() + 120
    while True:
        if server.poll() is not None:
            pytest.fail(f"JupyterLab exited with {server.returncode}:\n{log_path.read_text()[-3000:]}")
        try:
            urllib.request.urlopen(f"{base}/api", timeout=2)
            return
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not answer on {base}:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.5)


def _stop(server: subprocess.Popen) -> None:
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


def _lab_options(role: str, port: int, root: Path) -> list[str]:
    """The options `make lab ROLE=<role> PORT=<port> DELTALAB_NO_BROWSER=1` passes to
    `python -m deltalab lab` from a checkout at `root`."""
    return ["--role", role, "--port", str(port), "--root", str(root), "--no-browser"]


def _serve(role: str, tmp: Path) -> Iterator[Lab]:
    """`make lab ROLE=<role>` on a free port with a known token, over a copy of the course."""
    jupyter = Path(sys.executable).with_name("jupyter")
    require(jupyter.exists(), f"no jupyter next to {sys.executable} (run make setup)")
    root = tmp / "course"
    checkout_copy(root)
    _user_settings(tmp / "lab-settings")
    port, token = free_loopback_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_TOKEN=token,  # as `make lab JUPYTER_TOKEN=...` hands it on
               JUPYTERLAB_SETTINGS_DIR=str(tmp / "lab-settings"), JUPYTERLAB_WORKSPACES_DIR=str(tmp / "ws"),
               JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
               DELTALAB_WORKDIR=str(tmp / "work"),  # the kernels' tables: fresh, and this server's own
               DELTALAB_LEARNER_DIR=str(tmp / "mine"),  # the learner's workspace, made by make lab's command
               DELTALAB_NBGRADER_EXCHANGE=str(tmp / "exchange"))  # nbgrader's exchange, made on first use
    env.pop(JUPYTER_CONFIG_ENV, None)  # the checkout's src/deltalab/jupyter, as make lab uses it
    log_path = tmp / "jupyterlab.log"
    with log_path.open("wb") as log:
        # python -m deltalab lab checks the role, then execs jupyter: server.pid is JupyterLab's.
        server = subprocess.Popen([sys.executable, "-m", "deltalab", "lab", *_lab_options(role, port, root)],
                                  stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_serving(server, base, log_path)
        yield Lab(role, base, token, root, log_path, tmp / "work", tmp / "mine" if role == "learner" else root)
    finally:
        _stop(server)


@pytest.fixture(scope="module")
def learner_lab(tmp_path_factory) -> Iterator[Lab]:
    yield from _serve("learner", tmp_path_factory.mktemp("learner-lab"))


@pytest.fixture(scope="module")
def instructor_lab(tmp_path_factory) -> Iterator[Lab]:
    yield from _serve("instructor", tmp_path_factory.mktemp("instructor-lab"))


@pytest.fixture(scope="module")
def browser():
    require(CHROMIUM.exists(), "Debian's chromium is not installed (bash .ci/system-packages.sh)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(False, "playwright is not installed (pip install playwright, from the test extra)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser) -> Iterator[BrowserTab]:
    """A fresh tab (own cookies) that records the URL of every request it makes."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        tab = context.new_page()
        recorded = BrowserTab(tab)
        tab.on("request", lambda request: recorded.requests.append(request.url))
        yield recorded
    finally:
        context.close()


def _open_rendered(page: BrowserTab, lab: Lab, path: str, heading: str) -> None:
    """Log in with the token on `path` (a Markdown file) and wait for it to be rendered.

    JupyterLab opens a document from the URL only after every plugin has been activated and the
    layout restored, so once it is rendered, the menus and side panels are complete and every
    plugin's first requests have been sent.
    """
    page.tab.goto(f"{lab.base}/lab/tree/{path}?token={lab.token}", wait_until="domcontentloaded")
    rendered = page.tab.locator(".jp-RenderedMarkdown").filter(has_text=heading)
    rendered.first.wait_for(timeout=LOAD_TIMEOUT_MS)


def _menu_labels(page: BrowserTab) -> list[str]:
    return page.tab.locator(".lm-MenuBar-itemLabel").all_inner_texts()


def _side_panel_titles(page: BrowserTab) -> list[str]:
    return [tab.get_attribute("title") or "" for tab in page.tab.locator(".jp-SideBar .lm-TabBar-tab").all()]


def _page_config(page: BrowserTab) -> dict:
    """The configuration the server handed this page (PageConfig: disabled extensions, ...)."""
    return json.loads(page.tab.locator("#jupyter-config-data").text_content())


def _no_news(page: BrowserTab) -> None:
    """JupyterLab's news plugin never ran (it asks for its config section when it starts), and no
    news prompt is on screen."""
    asked = [url for url in page.requests if NEWS_PLUGIN_CONFIG in url]
    assert not asked, f"JupyterLab's news plugin ran (it requested {asked[0]}): the news prompt can appear"
    toasts = page.tab.locator(".Toastify__toast").filter(has_text=NEWS_PROMPT)
    assert toasts.count() == 0, f"the news prompt is on screen: {toasts.all_inner_texts()}"


def _screenshot(page: BrowserTab, name: str) -> Path:
    screenshot = artifacts() / name
    page.tab.screenshot(path=str(screenshot), full_page=False)
    assert screenshot.stat().st_size > 10_000, "the screenshot is empty"
    return screenshot


@pytest.mark.parametrize("role", ["learner", "instructor"])
def test_the_servers_here_are_make_labs_command_line(role):
    """What _serve runs (python -m deltalab lab and its options) is what `make lab ROLE=<role>`
    runs; the token reaches it through the environment, not the command line."""
    require(shutil.which("make") is not None, "make is not installed")
    token = secrets.token_hex(8)
    env = dict(os.environ, DELTALAB_NO_BROWSER="1")
    done = subprocess.run(["make", "-n", "--no-print-directory", "lab", f"ROLE={role}", "PORT=8899",
                           f"JUPYTER_TOKEN={token}"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    launches = [shlex.split(line) for line in done.stdout.splitlines() if " -m deltalab lab " in line]
    assert len(launches) == 1, f"make lab should run python -m deltalab lab once:\n{done.stdout}"
    assert Path(launches[0][0]).name.startswith("python"), launches[0]
    assert launches[0][1:4] == ["-m", "deltalab", "lab"], launches[0]
    assert launches[0][4:] == _lab_options(role, 8899, REPO), launches[0]
    assert token not in done.stdout, "make lab puts the token on the command line"
    # What those options start: the role's working directory and file, as the browser tests expect.
    launch = lab_launch(role, root=REPO, port=8899, browser=False,
                        environ={k: v for k, v in os.environ.items() if k != JUPYTER_CONFIG_ENV})
    assert launch.course == REPO
    assert launch.cwd == launch.served / WORKING_DIRS[role]
    assert launch.argv[-1] == str(launch.served / OPENS[role])
    assert launch.env["JUPYTER_CONFIG_PATH"].split(os.pathsep)[0] == str(REPO / "src" / "deltalab" / "jupyter" / role)


def test_instructor_lab_has_nbgrader_tools_and_opens_labs(instructor_lab, page):
    lab = instructor_lab
    _open_rendered(page, lab, OPENS["instructor"], "Classroom labs")

    menus = _menu_labels(page)
    assert "Nbgrader" in menus, f"the instructor's menu bar has no Nbgrader menu: {menus}"
    panels = _side_panel_titles(page)
    assert any("Create Assignment" in title for title in panels), f"no Create Assignment panel: {panels}"
    breadcrumbs = page.tab.locator(".jp-FileBrowser .jp-BreadCrumbs").first.inner_text()
    assert "labs" in breadcrumbs, f"the file browser should be in labs/, shows {breadcrumbs!r}"

    # The formgrader reads labs/nbgrader_config.py (the server runs in labs/) and lists every lab.
    response = page.tab.request.get(f"{lab.base}/formgrader/api/assignments")
    assert response.status == 200, f"the formgrader API answered {response.status}:\n{lab.log.read_text()[-2000:]}"
    listed = sorted(assignment["name"] for assignment in response.json())
    labs = sorted(path.name for path in (lab.root / "labs" / "source").iterdir() if path.is_dir())
    assert listed == labs, f"the formgrader lists {listed}, labs/source/ has {labs}"
    # Its Manage Assignments page has an exchange (no "does not exist and could not be created").
    manage = page.tab.request.get(f"{lab.base}/formgrader/manage_assignments")
    assert manage.status == 200 and "Manage Assignments" in manage.text(), manage.status
    assert 'id="warning-exchange"' not in manage.text(), "the formgrader says nbgrader's exchange is missing"

    _no_news(page)
    screenshot = _screenshot(page, "browser-instructor-labs.png")
    print(f"\nbrowser test: the instructor's labs/, menus {menus}, formgrader lists {len(listed)} labs; "
          f"screenshot: {screenshot}")


def test_learner_lab_needs_the_token_and_opens_a_clean_course_index(learner_lab, page):
    lab = learner_lab

    # Without the token: the login page, asking for it.
    page.tab.goto(f"{lab.base}/lab", wait_until="domcontentloaded")
    assert "/login" in page.tab.url, f"without the token JupyterLab should redirect to /login, got {page.tab.url}"
    page.tab.locator("#password_input").wait_for(timeout=30_000)
    assert "token" in page.tab.content().lower(), "the login page should ask for the token"

    # The URL JupyterLab prints, which a learner without a browser here copies, leads to the index too.
    printed = re.findall(rf"{re.escape(lab.base)}(/[^?\s]*)\?token=", lab.log.read_text())
    assert printed and set(printed) == {f"/lab/tree/{OPENS['learner']}"}, \
        f"the printed URL should open the course index, it opens {printed}"

    # With the token: the course index, rendered (make lab's Markdown-preview default).
    _open_rendered(page, lab, OPENS["learner"], "The course, notebook by notebook")
    assert page.tab.get_by_role("link", name="Hello, Delta Lake").count() > 0, "the index links notebook 00"

    # No instructor tools: nbgrader's lab extension is disabled, so no menu and no panel ...
    menus = _menu_labels(page)
    assert "Help" in menus, f"the menu bar is not complete yet: {menus}"
    assert "Nbgrader" not in menus, f"the learner's menu bar has nbgrader's menu: {menus}"
    panels = _side_panel_titles(page)
    assert any("File Browser" in title for title in panels), f"the side bars are not complete yet: {panels}"
    assert not any("Create Assignment" in title for title in panels), f"the learner has nbgrader's panel: {panels}"
    disabled = _page_config(page)["disabledExtensions"]
    assert "@jupyter/nbgrader" in disabled, f"the learner's page does not disable nbgrader: {disabled}"
    # ... and nbgrader's server extensions are off: no formgrader behind the lab either.
    formgrader = page.tab.request.get(f"{lab.base}/formgrader/api/assignments")
    assert formgrader.status == 404, f"the learner's server answers the formgrader API ({formgrader.status})"

    # The learner's own workspace, outside the course: the notebooks and the labs' student versions,
    # no solutions, no repository around them.
    served = _contents(page, lab, "")
    assert served == ["labs", "notebooks"], f"the learner's file browser shows {served}"
    labs = _contents(page, lab, "labs")
    assert "source" not in labs and "release" not in labs and "lab02_log" in labs, f"labs/ shows {labs}"
    assert not (lab.served / "labs" / "source").exists() and lab.root not in lab.served.parents

    # No news prompt.
    _no_news(page)
    screenshot = _screenshot(page, "browser-learner-index.png")
    print(f"\nbrowser test: the learner's course index, menus {menus}; screenshot: {screenshot}")


def test_learner_lab_runs_notebook_00(learner_lab, page):
    lab = learner_lab
    # Notebook 00, the learner's copy (no outputs stored): run all cells, find the row count in the output.
    page.tab.goto(f"{lab.base}/lab/tree/notebooks/{NOTEBOOK}?token={lab.token}", wait_until="domcontentloaded")
    tab = page.tab
    panel = tab.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    panel.locator(".jp-Cell").first.wait_for(timeout=LOAD_TIMEOUT_MS)
    # The kernel is up once the status bar names it and says Idle (the toolbar's indicator already
    # says idle before any kernel exists: "Run All" then would only ask which kernel to start).
    tab.locator(".jp-StatusBar-Widget").filter(has_text=KERNEL_IDLE).first.wait_for(timeout=LOAD_TIMEOUT_MS)
    stored = page.tab.request.get(f"{lab.base}/api/contents/notebooks/{NOTEBOOK}?token={lab.token}").json()
    assert not any(cell.get("outputs") for cell in stored["content"]["cells"]), \
        "the learner's copy of notebook 00 should have no outputs before it runs"
    _menu(tab, "Edit", "Clear Outputs of All Cells")
    outputs = panel.locator(".jp-OutputArea-output")
    tab.wait_for_function("() => document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output').length === 0",
                          timeout=30_000)
    assert outputs.count() == 0, "the stored outputs should be gone before the run"

    started = time.monotonic()
    _menu(tab, "Run", "Run All Cells")
    row_count = panel.locator(".jp-OutputArea-output").filter(has_text="Read back 10 rows.")
    row_count.first.wait_for(state="attached", timeout=RUN_TIMEOUT_MS)
    versions = panel.locator(".jp-Cell").last.locator(".jp-OutputArea-output").filter(has_text="Checked with: Spark 4.2.0")
    versions.first.wait_for(state="attached", timeout=RUN_TIMEOUT_MS)
    seconds = time.monotonic() - started
    errors = panel.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    assert errors.count() == 0, f"notebook 00 printed errors in the browser: {errors.all_inner_texts()[:3]}"
    assert "The log says the table has 10 rows in 2 files." in panel.inner_text(), "the log's row count is shown"
    first_commit = lab.work / "00_hello_delta" / "hello_delta" / "_delta_log" / "00000000000000000000.json"
    assert first_commit.exists(), f"the outputs are on screen but the kernel wrote no table at {first_commit}"
    _no_news(page)

    row_count.first.scroll_into_view_if_needed()
    screenshot = _screenshot(page, "browser-00_hello_delta.png")

    # The figure the run drew (the file lifetimes of hello_delta), as the learner sees it: an image JupyterLab
    # rendered, decoded by the browser, with a picture in it rather than a blank rectangle.
    figure = panel.locator(".jp-RenderedImage img").first
    figure.wait_for(state="attached", timeout=RUN_TIMEOUT_MS)
    figure.scroll_into_view_if_needed()
    natural = figure.evaluate("img => [img.complete, img.naturalWidth, img.naturalHeight]")
    assert natural[0] and natural[1] > 300 and natural[2] > 150, f"the figure is not a decoded image: {natural}"
    drawn = artifacts() / "browser-00_hello_delta-figure.png"
    figure.screenshot(path=str(drawn))
    share, colours = ink(drawn)
    assert share > 0.05 and colours > 50, f"the rendered figure looks blank: {share:.1%} of its pixels not background, {colours} colours"
    print(f"\nbrowser test: notebook 00 ran in {seconds:.0f} s in Chromium; screenshot: {screenshot}; its figure as "
          f"rendered ({natural[1]}x{natural[2]}, {share:.0%} ink): {drawn}")


def _contents(page, lab: Lab, folder: str) -> list[str]:
    """The names JupyterLab's file browser lists in ``folder`` of the served root (its contents API)."""
    response = page.tab.request.get(f"{lab.base}/api/contents/{folder}?token={lab.token}")
    assert response.status == 200, f"the contents API answered {response.status} for {folder!r}"
    return sorted(item["name"] for item in response.json()["content"])


def _menu(tab, menu: str, item: str) -> None:
    """Click an item of JupyterLab's main menu, as a person would."""
    tab.locator(".lm-MenuBar-itemLabel", has_text=menu).first.click()
    tab.locator(".lm-Menu-item:not(.lm-mod-disabled)").filter(
        has=tab.locator(".lm-Menu-itemLabel", has_text=item)).first.click()
