"""A classroom on one machine (``deltalab.classroom``): JupyterHub on 127.0.0.1 with the course for
three students and an instructor, driven as they would drive it.

The tests marked ``classroom`` start a real hub (its Python proxy, the idle culler, one JupyterLab per
student) and are left out of ``make test``: ``make test-classroom`` runs them, CI too. Students log in
with the class password through the hub's login form; each student's server serves their own
workspace (the notebooks without outputs, the labs' student versions, no solutions) and refuses
another student's token; notebook 00 runs in the three servers at once, each writing only in its
student's work directory; stopping the hub leaves no process of it. The class list's rules need no
hub and run in ``make test``.
"""

from __future__ import annotations

import json
import secrets
from concurrent.futures import ThreadPoolExecutor

import pytest

from classroom_testing import log_in, run_notebook, server_get
from course_testing import REPO
from deltalab.classroom import Classroom, check_names, class_password, home_of, start_classroom
from deltalab.errors import DeltaLabError
from deltalab.processes import is_running, process_tree

STUDENTS = ["ada", "bo", "cy"]
INSTRUCTORS = ["ina"]
ANNOUNCEMENT = "Delta Lake internals: lab 02 is due on Friday"


@pytest.mark.parametrize("students, instructors, problem", [
    ([], ["ina"], "at least one student"),
    (["Ada"], [], "cannot be a user name"),
    (["ada", "../x"], [], "cannot be a user name"),
    (["ada"], ["ada"], "both as a student and as an instructor"),
    (["ada", "ada"], [], "appears twice"),
])
def test_a_class_list_the_hub_would_refuse_gets_one_clear_error(students, instructors, problem):
    with pytest.raises(DeltaLabError, match=problem):
        check_names(students, instructors)


def test_a_culler_that_would_stop_a_reading_student_is_refused(tmp_path):
    with pytest.raises(DeltaLabError, match="at least 60 seconds"):
        start_classroom(["ada"], root=tmp_path, idle_timeout=5)


def test_a_folder_without_the_course_is_refused(tmp_path):
    with pytest.raises(DeltaLabError, match="has no notebooks/ folder"):
        start_classroom(["ada"], root=tmp_path / "room", course=tmp_path)


@pytest.fixture(scope="module")
def classroom(tmp_path_factory) -> Classroom:
    root = tmp_path_factory.mktemp("classroom")
    (root / "jupyterhub_config_extra.py").write_text(f"c.JupyterHub.template_vars = {{'announcement': {ANNOUNCEMENT!r}}}\n")
    room = start_classroom(STUDENTS, INSTRUCTORS, root=root, password=secrets.token_urlsafe(9))
    yield room
    room.stop()


@pytest.fixture(scope="module")
def servers(classroom) -> dict[str, tuple[str, str]]:
    """Each student's server URL and a token of theirs, their servers started."""
    return {name: (classroom.start_server(name), classroom.user_token(name)) for name in STUDENTS}


@pytest.mark.classroom
def test_students_log_in_with_the_class_password_and_no_other(classroom):
    accepted = log_in(classroom.url, "ada", classroom.password)
    assert accepted.status_code == 302, accepted.text[:300]
    assert log_in(classroom.url, "ada", classroom.password + "x").status_code == 403
    assert log_in(classroom.url, "zed", classroom.password).status_code == 403   # not on the class list


@pytest.mark.classroom
def test_the_instructors_own_settings_are_read_after_the_classrooms(classroom):
    import requests

    assert ANNOUNCEMENT in requests.get(f"{classroom.url}/hub/login", timeout=30).text


@pytest.mark.classroom
def test_the_instructor_is_the_hubs_admin_and_the_idle_culler_runs(classroom):
    assert classroom.api("GET", "users/ina")["admin"] is True
    assert classroom.api("GET", "users/ada")["admin"] is False
    assert "idle-culler" in classroom.api("GET", "services")


@pytest.mark.classroom
def test_each_student_has_a_workspace_of_their_own_without_the_solutions(classroom, servers):
    course_notebooks = sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))
    for name, (url, token) in servers.items():
        listing = server_get(url, token, "contents/notebooks").json()["content"]
        assert sorted(item["name"] for item in listing if item["name"].endswith(".ipynb")) == course_notebooks
        notebook = server_get(url, token, "contents/notebooks/00_hello_delta.ipynb").json()["content"]
        assert all(not cell.get("outputs") for cell in notebook["cells"]), "the workspace's notebooks have no outputs"
        labs = {item["name"] for item in server_get(url, token, "contents/labs").json()["content"]}
        assert "source" not in labs and "lab02_log" in labs
        assert (home_of(classroom.root, name) / "course" / "notebooks" / "00_hello_delta.ipynb").is_file()
    ada_url, ada_token = servers["ada"]
    bo_url, _ = servers["bo"]
    assert server_get(bo_url, ada_token, "contents").status_code == 403, "a student's token opens another's server"


@pytest.mark.classroom
def test_notebook_00_runs_in_three_students_servers_at_once(classroom, servers):
    with ThreadPoolExecutor(len(servers)) as pool:
        errors = dict(zip(servers, pool.map(lambda s: run_notebook(*s, "notebooks/00_hello_delta.ipynb"),
                                            servers.values())))
    assert errors == {name: [] for name in servers}
    for name in servers:
        logs = list((home_of(classroom.root, name) / "work").rglob("_delta_log/00000000000000000000.json"))
        assert logs, f"{name}'s notebook wrote no table in {name}'s work directory"
        assert all(json.loads(line) for line in logs[0].read_text().splitlines())


@pytest.mark.classroom
def test_stopping_the_hub_stops_every_server_and_kernel(classroom, servers):
    tree = process_tree(classroom.process.pid)
    assert len(tree) > 1 + len(servers)   # the guardian, the hub, its proxy, the culler, the servers
    classroom.stop()
    assert not [p for p in tree if is_running(p)]


def test_the_drawn_class_password_is_kept_for_the_next_start_and_private(tmp_path):
    first = class_password(tmp_path)
    assert len(first) >= 12 and class_password(tmp_path) == first
    assert (tmp_path / "class-password").stat().st_mode & 0o077 == 0
