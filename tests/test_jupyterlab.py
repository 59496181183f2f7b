"""deltalab.jupyterlab: JupyterLab's command line, environment and working directory per role
(what `make lab`, `make instructor` and the course image run), what it refuses, and `make lab`
itself: a real server that wants the token.

Only test_make_lab_requires_the_token starts a server; tests/test_browser.py opens both roles in
a browser.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from course_testing import require
from deltalab import jupyterlab
from deltalab.errors import DeltaLabError
from deltalab.jupyterlab import LabLaunch, course_root, jupyter_config_dir, lab_launch
from deltalab.processes import free_loopback_port

REPO = Path(__file__).resolve().parents[1]
PACKAGE_JUPYTER = REPO / "src" / "deltalab" / "jupyter"
PYTHON_BIN = Path(sys.executable).parent


@pytest.fixture
def course(tmp_path: Path) -> Path:
    """A course folder as a checkout has it: the index, the labs' README and nbgrader config."""
    root = tmp_path / "course"
    for name in ("notebooks/README.md", "labs/README.md", "labs/nbgrader_config.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    (root / "labs" / "source").mkdir()
    return root


@pytest.fixture
def as_user(monkeypatch) -> None:
    """Not root, whoever runs the tests (CI runs them as root)."""
    monkeypatch.setattr(jupyterlab, "_is_root", lambda: False)


@pytest.fixture
def with_nbgrader(monkeypatch) -> None:
    monkeypatch.setattr(jupyterlab, "_module_installed", lambda name: True)


def _launch(role: str, root: Path, **kwargs) -> LabLaunch:
    environ = kwargs.pop("environ", {"PATH": "/usr/bin:/bin", "HOME": "/home/someone"})
    return lab_launch(role, root=root, environ=environ, **kwargs)


def test_learner_serves_their_workspace_and_opens_its_index(course, as_user):
    launch = _launch("learner", course)
    mine = Path("/home/someone/deltalab-course")
    assert launch.role == "learner"
    assert launch.argv == [
        str(PYTHON_BIN / "jupyter"), "lab", "--ip=127.0.0.1", "--port=8888", f"--ServerApp.root_dir={mine}",
        "--LabApp.default_url=/lab/tree/notebooks/README.md", "--ServerApp.log_level=WARN",
        str(mine / "notebooks" / "README.md"),
    ]
    assert launch.cwd == launch.served == mine, "the learner works in their own copy, outside the repository"
    assert launch.course == course
    assert launch.opens == "notebooks/README.md"
    assert launch.env["JUPYTER_CONFIG_PATH"] == str(PACKAGE_JUPYTER / "learner")
    assert launch.env["PATH"] == os.pathsep.join([str(PYTHON_BIN), "/usr/bin:/bin"])
    assert launch.env["HOME"] == "/home/someone", "the rest of the environment is kept"
    elsewhere = _launch("learner", course, environ={"DELTALAB_LEARNER_DIR": "/srv/ada", "HOME": "/home/someone"})
    assert elsewhere.served == Path("/srv/ada")


def test_instructor_starts_in_labs_with_its_settings(course, as_user, with_nbgrader):
    launch = _launch("instructor", course, port=8899, browser=False)
    assert launch.served == course, "the instructor works on the course itself (nbgrader's source/ and release/)"
    assert launch.argv == [
        str(PYTHON_BIN / "jupyter"), "lab", "--ip=127.0.0.1", "--port=8899", f"--ServerApp.root_dir={course}",
        "--LabApp.default_url=/lab/tree/labs/README.md", "--no-browser", "--ServerApp.log_level=WARN",
        str(course / "labs" / "README.md"),
    ]
    assert launch.cwd == course / "labs", "nbgrader reads labs/nbgrader_config.py from its working directory"
    assert launch.opens == "labs/README.md"
    assert launch.env["JUPYTER_CONFIG_PATH"] == str(PACKAGE_JUPYTER / "instructor")
    assert launch.env["PATH"].split(os.pathsep)[0] == str(PYTHON_BIN), "nbgrader runs alembic by name"


def test_the_role_settings_go_before_a_config_path_already_set(course, as_user):
    launch = _launch("learner", course, environ={"JUPYTER_CONFIG_PATH": "/etc/mine"})
    assert launch.env["JUPYTER_CONFIG_PATH"] == os.pathsep.join([str(PACKAGE_JUPYTER / "learner"), "/etc/mine"])
    assert launch.env["PATH"] == str(PYTHON_BIN)


def test_the_token_stays_in_the_environment(course, as_user):
    launch = _launch("learner", course, environ={"JUPYTER_TOKEN": "s3cret", "PATH": "/bin"})
    assert launch.env["JUPYTER_TOKEN"] == "s3cret"
    assert not any("s3cret" in arg for arg in launch.argv), f"the token is on the command line: {launch.argv}"
    assert not any(".token" in arg for arg in launch.argv), f"a token option is on the command line: {launch.argv}"
    assert "--ServerApp.log_level=WARN" not in launch.argv, "with a token of the user's, the URL is in the start-up lines"


def test_the_image_listens_everywhere_and_passes_options_on(course, as_user):
    launch = _launch("learner", course, ip="0.0.0.0", browser=False, extra_args=["--ServerApp.quit_button=False"])
    mine = launch.served
    assert launch.argv[2:] == [
        "--ip=0.0.0.0", "--port=8888", f"--ServerApp.root_dir={mine}",
        "--LabApp.default_url=/lab/tree/notebooks/README.md", "--no-browser", "--ServerApp.log_level=WARN",
        "--ServerApp.quit_button=False", str(mine / "notebooks" / "README.md"),
    ]


def test_as_root_jupyter_is_allowed_to_start(course, monkeypatch):
    monkeypatch.setattr(jupyterlab, "_is_root", lambda: True)
    assert "--allow-root" in _launch("learner", course).argv


def test_the_settings_and_root_come_from_the_image_environment(course, tmp_path, as_user):
    settings = tmp_path / "opt-jupyter"
    (settings / "learner").mkdir(parents=True)
    environ = {"DELTALAB_JUPYTER_CONFIG": str(settings), "DELTALAB_COURSE_DIR": str(course), "HOME": str(tmp_path)}
    assert jupyter_config_dir(environ) == settings
    assert course_root(environ) == course
    launch = lab_launch("learner", environ=environ)
    assert launch.env["JUPYTER_CONFIG_PATH"] == str(settings / "learner")
    assert launch.course == course and launch.cwd == tmp_path / "deltalab-course"


def test_from_a_checkout_the_defaults_are_the_checkouts():
    assert jupyter_config_dir({}) == PACKAGE_JUPYTER
    assert course_root({}) == REPO


def test_an_unknown_role_is_refused(course, as_user):
    with pytest.raises(DeltaLabError, match="'teacher' is not a JupyterLab role") as error:
        _launch("teacher", course)
    assert "DELTALAB_ROLE" in error.value.fix and "make instructor" in error.value.fix


def test_the_instructor_without_nbgrader_is_refused(course, as_user, monkeypatch):
    monkeypatch.setattr(jupyterlab, "_module_installed", lambda name: name != "nbgrader")
    with pytest.raises(DeltaLabError, match="needs nbgrader") as error:
        _launch("instructor", course)
    assert "make instructor" in error.value.fix


def test_the_instructor_without_the_labs_is_refused(course, as_user, with_nbgrader):
    (course / "labs" / "nbgrader_config.py").unlink()
    with pytest.raises(DeltaLabError, match="needs the labs") as error:
        _launch("instructor", course)
    assert f"mount your checkout's labs/source at {course / 'labs' / 'source'}" in error.value.fix


def test_the_instructor_without_the_labs_sources_is_refused(course, as_user, with_nbgrader):
    """The course image has nbgrader and the labs' settings, never their sources (the solutions)."""
    (course / "labs" / "source").rmdir()
    with pytest.raises(DeltaLabError, match=r"needs the labs, and .*labs/source does not exist"):
        _launch("instructor", course)


def test_a_folder_that_is_not_the_course_is_refused(tmp_path, as_user):
    with pytest.raises(DeltaLabError, match="has no notebooks/README.md") as error:
        _launch("learner", tmp_path)
    assert "--root" in error.value.fix


def test_a_settings_folder_without_the_role_is_refused(course, tmp_path, as_user):
    with pytest.raises(DeltaLabError, match="no Jupyter settings for the learner") as error:
        _launch("learner", course, environ={"DELTALAB_JUPYTER_CONFIG": str(tmp_path / "nowhere")})
    assert "DELTALAB_JUPYTER_CONFIG" in error.value.fix


def test_the_command_checks_and_prints_what_the_role_opens(course, capsys, monkeypatch, with_nbgrader):
    from deltalab.__main__ import main

    monkeypatch.delenv("DELTALAB_JUPYTER_CONFIG", raising=False)

    assert main(["lab", "--role", "instructor", "--root", str(course), "--check"]) == 0
    assert capsys.readouterr().out == "labs/README.md\n"
    assert main(["lab", "--role", "teacher", "--root", str(course), "--check"]) == 2
    assert "deltalab: 'teacher' is not a JupyterLab role" in capsys.readouterr().err


def test_the_command_becomes_jupyterlab(course, monkeypatch, as_user):
    from deltalab.__main__ import main

    monkeypatch.delenv("DELTALAB_JUPYTER_CONFIG", raising=False)
    calls = []
    monkeypatch.setattr(jupyterlab.os, "chdir", lambda path: calls.append(("chdir", path)))
    monkeypatch.setattr(jupyterlab.os, "execve", lambda path, argv, env: calls.append(("execve", path, argv, env)))
    monkeypatch.setenv("JUPYTER_TOKEN", "s3cret")
    mine = course.parent / "mine"
    monkeypatch.setenv("DELTALAB_LEARNER_DIR", str(mine))
    main(["lab", "--root", str(course), "--ip", "0.0.0.0", "--port", "8890", "--no-browser", "--", "--debug"])
    (chdir, cwd), (execve, path, argv, env) = calls
    assert cwd == mine and (mine / "notebooks" / "README.md").is_file(), "the workspace is made before the start"
    assert path == argv[0] == str(PYTHON_BIN / "jupyter")
    assert argv[1:] == ["lab", "--ip=0.0.0.0", "--port=8890", f"--ServerApp.root_dir={mine}",
                        "--LabApp.default_url=/lab/tree/notebooks/README.md", "--no-browser",
                        "--debug", str(mine / "notebooks" / "README.md")]
    assert env["JUPYTER_TOKEN"] == "s3cret"


# --- make lab ---------------------------------------------------------------------------------

def _status(url: str, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_make_lab_requires_the_token(tmp_path):
    require(shutil.which("make") is not None, "make is not installed")
    port, token = free_loopback_port(), "course-test-token"
    env = dict(os.environ, PORT=str(port), JUPYTER_TOKEN=token, DELTALAB_NO_BROWSER="1",
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), JUPYTER_CONFIG_DIR=str(tmp_path / "config"))
    server = subprocess.Popen(["make", "-s", "lab"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while True:
            try:
                if _status(f"{base}/api/status") in (200, 403):
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "JupyterLab did not start within 180 s"
            assert server.poll() is None, "make lab exited early"
            time.sleep(1)
        assert _status(f"{base}/api/contents") == 403
        assert _status(f"{base}/api/contents", {"Authorization": f"token {token}"}) == 200
        assert _status(f"{base}/api/contents/notebooks/README.md?token={token}") == 200
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)


def test_each_role_has_its_own_workspace_outside_the_course(course, as_user, with_nbgrader):
    learner = _launch("learner", course, environ={"HOME": "/home/someone", "PATH": "/bin"})
    instructor = _launch("instructor", course, environ={"HOME": "/home/someone", "PATH": "/bin"})
    assert learner.env["JUPYTERLAB_WORKSPACES_DIR"] == "/home/someone/.local/share/deltalab/workspaces/learner"
    assert instructor.env["JUPYTERLAB_WORKSPACES_DIR"] == "/home/someone/.local/share/deltalab/workspaces/instructor"
    assert _launch("learner", course, environ={"XDG_DATA_HOME": "/data", "PATH": "/bin"}).env[
        "JUPYTERLAB_WORKSPACES_DIR"] == "/data/deltalab/workspaces/learner"
    chosen = _launch("learner", course, environ={"JUPYTERLAB_WORKSPACES_DIR": "/mine", "PATH": "/bin"})
    assert chosen.env["JUPYTERLAB_WORKSPACES_DIR"] == "/mine", "a folder set by hand wins"
