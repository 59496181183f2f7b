"""A classroom on one machine (``deltalab.classroom``): JupyterHub on 127.0.0.1 with the course for
three students and an instructor, driven as they would drive it.

The tests marked ``classroom`` start a real hub (its Python proxy, the idle culler, one JupyterLab per
student) and are left out of ``make test``: ``make test-classroom`` runs them, CI in the course image
(.ci/container.sh). Students log in
with the class password through the hub's login form; each student's server serves their own
workspace (the notebooks without outputs, the labs' student versions, no solutions) and refuses
another student's token; notebook 00 runs in the three servers at once, each writing only in its
student's work directory; lab 01 goes from the instructor's release through three students' fetch and
two submissions to grades and feedback, by nbgrader's exchange; stopping the hub leaves no process of
it. The idle culler, on a hub of its own, is tested in test_classroom_culler.py (a module of its own,
so that a second pytest worker runs its minutes of waiting beside these). The class list's rules and
the users' nbgrader settings need no hub and run in ``make test``.
"""

from __future__ import annotations

import csv
import json
import re
import secrets
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from classroom_testing import (log_in, peak_memory, put_notebook, run_command, run_notebook, server_get, start_server,
                               user_token)
from course_testing import REPO
from deltalab.classroom import (CLASSROOM_DRIVER_MEMORY, COURSE_ID, Classroom, check_names, class_password, copy_labs,
                                home_of, nbgrader_settings, start_classroom)
from deltalab.errors import DeltaLabError
from deltalab.processes import is_running, process_tree
from process_testing import poll, tree_memory

STUDENTS = ["ada", "bo", "cy"]
INSTRUCTORS = ["ina"]
ANNOUNCEMENT = "Delta Lake internals: lab 02 is due on Friday"
#: The lab that goes through nbgrader's exchange: the lightest (lab 01), since what is tested is the exchange's
#: steps, the same for every lab; autograding a lab starts one kernel, and so one JVM, per submission.
LAB = "lab01_parquet"


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


@pytest.mark.parametrize("memory", ["lots", "1.5g", "1024", "512m", "-1g"])
def test_a_driver_heap_that_would_not_start_is_refused_before_the_hub_starts(tmp_path, memory):
    with pytest.raises(DeltaLabError, match="is not a heap size for the course's Spark driver") as error:
        start_classroom(["ada"], root=tmp_path, driver_memory=memory)
    assert "the default here: 1g" in error.value.fix


def test_a_culler_that_would_stop_a_reading_student_is_refused(tmp_path):
    with pytest.raises(DeltaLabError, match="at least 60 seconds"):
        start_classroom(["ada"], root=tmp_path, idle_timeout=5)


def test_the_proxy_waits_for_a_loaded_students_server_as_long_as_a_cell_may_run(tmp_path, monkeypatch):
    """The Python proxy's own limit is 20 s; a kernel's websocket on a loaded hub took longer (a CI run)."""
    from traitlets.config import Config

    from deltalab.classroom import API_TOKEN_ENV, INSTRUCTOR_PASSWORD_ENV, PASSWORD_ENV, PROXY_TIMEOUT, configure_hub
    for name in (API_TOKEN_ENV, INSTRUCTOR_PASSWORD_ENV, PASSWORD_ENV):
        monkeypatch.setenv(name, secrets.token_hex(8))
    settings = {"root": str(tmp_path), "ip": "127.0.0.1", "port": 1, "hub_port": 2, "proxy_api_port": 3,
                "students": ["ada"], "instructors": ["ina"], "idle_timeout": 3600, "activity_interval": 300}
    (tmp_path / "settings.json").write_text(json.dumps(settings))
    c = Config()
    configure_hub(c, tmp_path / "settings.json")
    assert f"--proxy-timeout={PROXY_TIMEOUT * 1000}" in c.ConfigurableHTTPProxy.command
    assert PROXY_TIMEOUT >= 600


def test_a_folder_without_the_course_is_refused(tmp_path):
    with pytest.raises(DeltaLabError, match="has no notebooks/ folder"):
        start_classroom(["ada"], root=tmp_path / "room", course=tmp_path)


def test_a_classroom_folder_inside_the_course_is_refused(tmp_path):
    (tmp_path / "notebooks").mkdir()
    with pytest.raises(DeltaLabError, match="is inside the course"):
        start_classroom(["ada"], root=tmp_path / "room", course=tmp_path)


def test_instructors_without_the_labs_sources_are_refused(tmp_path):
    """The course image never holds labs/source; an instructor's course folder copied without it
    would stay without it (it is copied once)."""
    (tmp_path / "course" / "notebooks").mkdir(parents=True)
    (tmp_path / "course" / "labs").mkdir()
    (tmp_path / "course" / "labs" / "nbgrader_config.py").write_text("")
    with pytest.raises(DeltaLabError, match="has no labs/source, which the instructors") as error:
        start_classroom(["ada"], ["ina"], root=tmp_path / "room", course=tmp_path / "course")
    assert "mount your checkout's labs/source" in error.value.fix


@pytest.mark.parametrize("password, instructor_password, problem", [
    ("short", None, "class password in DELTALAB_CLASSROOM_PASSWORD has 5 characters"),
    (None, "x" * 31, "instructor password in DELTALAB_CLASSROOM_INSTRUCTOR_PASSWORD has 31 characters"),
    ("y" * 40, "y" * 40, "are the same"),
])
def test_passwords_jupyterhub_would_refuse_get_one_clear_error(tmp_path, password, instructor_password, problem):
    (tmp_path / "course" / "notebooks").mkdir(parents=True)
    (tmp_path / "course" / "labs" / "source").mkdir(parents=True)
    (tmp_path / "course" / "labs" / "nbgrader_config.py").write_text("")
    with pytest.raises(DeltaLabError, match=problem):
        start_classroom(["ada"], ["ina"], root=tmp_path / "room", course=tmp_path / "course",
                        password=password, instructor_password=instructor_password)


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
    return {name: (start_server(classroom, name), user_token(classroom, name)) for name in STUDENTS}


@pytest.mark.classroom
def test_students_log_in_with_the_class_password_and_no_other(classroom):
    accepted = log_in(classroom.url, "ada", classroom.password)
    assert accepted.status_code == 302, accepted.text[:300]
    assert log_in(classroom.url, "ada", classroom.password + "x").status_code == 403
    assert log_in(classroom.url, "zed", classroom.password).status_code == 403   # not on the class list
    assert log_in(classroom.url, "ina", classroom.password).status_code == 403   # the instructor has their own
    assert log_in(classroom.url, "ina", classroom.instructor_password).status_code == 302


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
        pid = classroom.api("GET", f"users/{name}")["servers"][""]["state"]["pid"]
        environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert f"DELTALAB_DRIVER_MEMORY={CLASSROOM_DRIVER_MEMORY}".encode() in environment, (
            "a student's server (and so their kernels' Spark drivers) should get the classroom's driver heap")
    ada_url, ada_token = servers["ada"]
    bo_url, _ = servers["bo"]
    assert server_get(bo_url, ada_token, "contents").status_code == 403, "a student's token opens another's server"


@pytest.mark.classroom
def test_notebook_00_runs_in_three_students_servers_at_once(classroom, servers):
    """Also measures each student's memory (a figure printed, not a threshold): the peak of their
    server's process tree (JupyterLab, the kernel, its Spark driver) while notebook 00 runs, and
    after, when the kernel is shut down."""
    pids = {name: classroom.api("GET", f"users/{name}")["servers"][""]["state"]["pid"] for name in servers}
    with ThreadPoolExecutor(len(servers)) as pool:
        runs = [pool.submit(run_notebook, *server, "notebooks/00_hello_delta.ipynb") for server in servers.values()]
        peaks = peak_memory(pids, runs)
        errors = {name: run.result() for name, run in zip(servers, runs)}
    assert errors == {name: [] for name in servers}
    idle = {name: tree_memory(pid) for name, pid in pids.items()}
    for name in servers:
        assert peaks[name].proportional > idle[name].proportional > 0
        print(f"{name}: while notebook 00 ran, at most {peaks[name].proportional / 2**20:,.0f} MiB proportional "
              f"({peaks[name].resident / 2**20:,.0f} MiB resident, {peaks[name].processes} processes); "
              f"idle after, {idle[name].proportional / 2**20:,.0f} MiB")
    for name in servers:
        logs = list((home_of(classroom.root, name) / "work").rglob("_delta_log/00000000000000000000.json"))
        assert logs, f"{name}'s notebook wrote no table in {name}'s work directory"
        assert all(json.loads(line) for line in logs[0].read_text().splitlines())


def test_the_classrooms_course_id_is_the_labs_one():
    settings = (REPO / "labs" / "nbgrader_config.py").read_text()
    assert re.search(r"c\.CourseDirectory\.course_id = ['\"]" + re.escape(COURSE_ID) + "['\"]", settings)


def at_once(step, names: list[str]) -> None:
    """``step(name)`` for every name at the same time, each in a thread; raises the first failure."""
    with ThreadPoolExecutor(len(names)) as pool:
        for done in [pool.submit(step, name) for name in names]:
            done.result()


@pytest.mark.classroom
def test_a_lab_goes_from_release_to_grades_and_feedback_through_nbgraders_exchange(classroom, servers):
    """The instructor releases lab 01, three students fetch it, ada submits the solution, bo the
    untouched student version, cy nothing; the instructor collects, autogrades and exports the grades,
    then returns feedback, which the two students fetch. Every step is nbgrader's command, run in the
    server of the user who would run it; the students run theirs at the same time, as a class does."""
    instructor = (start_server(classroom, "ina"), user_token(classroom, "ina"))
    labs = home_of(classroom.root, "ina") / "labs"
    run_command(*instructor, ["nbgrader", "generate_assignment", LAB, "--force"], cwd="labs")
    run_command(*instructor, ["nbgrader", "release_assignment", LAB], cwd="labs")
    at_once(lambda name: run_command(*servers[name], ["nbgrader", "fetch_assignment", LAB]), list(servers))
    for url, token in servers.values():
        assert server_get(url, token, f"contents/{LAB}/{LAB}.ipynb").status_code == 200
    solution = json.loads((REPO / "labs" / "source" / LAB / f"{LAB}.ipynb").read_text())
    put_notebook(*servers["ada"], f"{LAB}/{LAB}.ipynb", solution)
    at_once(lambda name: run_command(*servers[name], ["nbgrader", "submit", LAB]), ["ada", "bo"])

    run_command(*instructor, ["nbgrader", "collect", LAB], cwd="labs")
    assert sorted(p.name for p in (labs / "submitted").iterdir()) == ["ada", "bo"]
    run_command(*instructor, ["nbgrader", "autograde", LAB, "--create", "--force"], cwd="labs")
    run_command(*instructor, ["nbgrader", "export", "--exporter=deltalab.labs.grading.PerCheckCsvExportPlugin",
                              f"--assignment={LAB}", "--to=grades.csv"], cwd="labs")
    with open(labs / "grades.csv", newline="") as grades_file:
        grades = {row["student_id"]: (float(row["score"]), float(row["max_score"])) for row in csv.DictReader(grades_file)}
    assert set(grades) == {"ada", "bo"}
    assert grades["ada"][0] == grades["ada"][1] > 0, "the solution gets every point"
    assert grades["bo"][0] == 0, "the untouched student version gets none"

    run_command(*instructor, ["nbgrader", "generate_feedback", LAB], cwd="labs")
    run_command(*instructor, ["nbgrader", "release_feedback", LAB], cwd="labs")
    at_once(lambda name: run_command(*servers[name], ["nbgrader", "fetch_feedback", LAB]), ["ada", "bo"])
    for name in ["ada", "bo"]:
        feedback = list((home_of(classroom.root, name) / "course" / LAB / "feedback").glob(f"*/{LAB}.html"))
        assert len(feedback) == 1, f"{name} fetched no feedback"


@pytest.mark.classroom
def test_stopping_the_hub_stops_every_server_and_kernel(classroom, servers):
    tree = process_tree(classroom.process.pid)
    assert len(tree) > 1 + len(servers)   # the guardian, the hub, its proxy, the culler, the servers
    classroom.stop()
    # A kernel's Spark driver ends after its kernel (the guardian sees its parent gone): a bound, not an instant.
    took = poll(lambda: not [p for p in tree if is_running(p)], 60, f"every process of the hub ended: {tree}")
    print(f"every process of the hub had ended {took:.1f} s after it stopped")


@pytest.mark.parametrize("kind, shortest", [("class-password", 8), ("instructor-password", 32)])
def test_a_drawn_password_is_kept_for_the_next_start_and_private(tmp_path, kind, shortest):
    first = class_password(tmp_path, kind)
    assert len(first) >= shortest and class_password(tmp_path, kind) == first
    assert (tmp_path / kind).stat().st_mode & 0o077 == 0
    (tmp_path / kind).write_text("")
    with pytest.raises(DeltaLabError, match="has 0 characters"):
        class_password(tmp_path, kind)


def test_students_submit_under_their_hub_name_and_instructors_grade_in_their_course_folder(tmp_path):
    student = nbgrader_settings(tmp_path, "ada", "learner")
    instructor = nbgrader_settings(tmp_path, "ina", "instructor")
    for settings in (student, instructor):
        assert f"c.CourseDirectory.course_id = {COURSE_ID!r}" in settings
        assert f"c.Exchange.root = {str(tmp_path / 'exchange')!r}" in settings
    assert "c.CourseDirectory.student_id = 'ada'" in student and "CourseDirectory.root" not in student
    assert f"c.CourseDirectory.root = {str(home_of(tmp_path, 'ina') / 'labs')!r}" in instructor
    assert "student_id" not in instructor
    # the course's settings first (the cell timeout), then the instructor's folder
    assert instructor.index("load_subconfig(") < instructor.index("c.CourseDirectory.root")


def test_an_instructors_course_folder_is_copied_once_without_what_nbgrader_wrote(tmp_path):
    labs = tmp_path / "labs"
    (labs / "source" / "lab02_log").mkdir(parents=True)
    (labs / "source" / "lab02_log" / "lab02_log.ipynb").write_text("{}")
    (labs / "nbgrader_config.py").write_text("c = get_config()\n")
    (labs / "gradebook.db").write_text("the repository's own grades")
    copy_labs(labs, tmp_path / "ina" / "labs")
    copied = sorted(str(p.relative_to(tmp_path / "ina" / "labs")) for p in (tmp_path / "ina" / "labs").rglob("*"))
    assert copied == ["nbgrader_config.py", "source", "source/lab02_log", "source/lab02_log/lab02_log.ipynb"]
    (tmp_path / "ina" / "labs" / "nbgrader_config.py").write_text("# the instructor's own\n")
    copy_labs(labs, tmp_path / "ina" / "labs")
    assert (tmp_path / "ina" / "labs" / "nbgrader_config.py").read_text() == "# the instructor's own\n"
