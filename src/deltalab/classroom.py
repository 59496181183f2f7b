"""A classroom on one machine: JupyterHub with the course for every student (``make classroom``).

An instructor with 40 students cannot ask each of them to install Java, Python and the course.
With a hub, each student logs in with a browser and gets a JupyterLab of their own, the learner's
one of ``make lab``: a workspace with the course's notebooks (outputs cleared) and the labs' student
versions (:mod:`deltalab.workspace`), and a work directory (``DELTALAB_WORKDIR``) of their own.
:func:`start_classroom` starts it, from packages (the ``classroom`` extra), on 127.0.0.1:

* JupyterHub, with the proxy it starts itself: the Python ``configurable-http-proxy`` (no Node);
* one single-user JupyterLab per student, started by JupyterHub's ``SimpleLocalProcessSpawner`` as
  the hub's own system user, in ``<root>/home/<name>``: every student's server, terminal and kernel
  runs as that user and can read the hub's files, so this is for a class that trusts each other
  on a machine (and an account) kept for it, not an isolation between students;
* JupyterHub's ``SharedPasswordAuthenticator``, limited to the class list: students log in with
  the class password (``DELTALAB_CLASSROOM_PASSWORD``, else drawn once and kept in
  ``<root>/class-password``), instructors, the hub's admins, with a separate one of at least 32
  characters (``DELTALAB_CLASSROOM_INSTRUCTOR_PASSWORD``, else ``<root>/instructor-password``);
* the idle culler, a hub service that stops a server idle for ``idle_timeout`` seconds, so that a
  student who left frees the memory of their kernels and Spark drivers;
* a service token (``Classroom.api_token``, drawn at each start, never on a command line) with which
  the :class:`Classroom` drives the hub's REST API: start a user's server, make a user's token;
* nbgrader's exchange, a folder of the classroom (``<root>/exchange``) every user's nbgrader settings
  name (:func:`nbgrader_settings`): the instructor runs ``nbgrader generate_assignment``,
  ``release_assignment``, ``collect``, ``autograde``, ``export``, ``generate_feedback`` and
  ``release_feedback`` in their course folder ``<home>/labs`` (a copy of the course's ``labs/``);
  students run ``nbgrader fetch_assignment``, ``submit`` and ``fetch_feedback`` in their workspace,
  under their hub name.

The hub's environment reaches the servers for the variables :data:`ENV_KEPT` names (Java, locale,
``SPARK_MASTER``, the course's ``DELTALAB_*`` settings), never the passwords or the service token.

Everything the hub writes (its database, cookie secret, proxy pid file, log, the students' homes)
goes under ``root``. ``jupyterhub -f <root>/jupyterhub_config.py`` reads the settings back through
:func:`configure_hub`, then the instructor's own ``<root>/jupyterhub_config_extra.py`` if there is
one (a real authenticator, an announcement): what it sets wins.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import signal
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deltalab.errors import DeltaLabError
from deltalab.jupyterlab import COURSE_DIR_ENV, OPENS, course_root, jupyter_config_dir, missing_labs
from deltalab.locations import CACHE_ENV, WORKDIR_ENV, cache_root
from deltalab.processes import end_process, free_loopback_port, process_tree, start_owned, wait_until
from deltalab.publish import publishing
from deltalab.session import DRIVER_MEMORY_ENV, check_driver_memory
from deltalab.workspace import LEARNER_DIR_ENV, update_workspace

#: The classroom's folder when none is given: ``$DELTALAB_CLASSROOM_DIR``, else ``~/deltalab-classroom``.
CLASSROOM_DIR_ENV = "DELTALAB_CLASSROOM_DIR"
#: The class's password (students), when it is not drawn; at least 8 characters.
PASSWORD_ENV = "DELTALAB_CLASSROOM_PASSWORD"
#: The instructors' password, when it is not drawn; at least 32 characters (JupyterHub's rule).
INSTRUCTOR_PASSWORD_ENV = "DELTALAB_CLASSROOM_INSTRUCTOR_PASSWORD"
#: How the hub process receives the service token (the environment, not the command line).
API_TOKEN_ENV = "DELTALAB_CLASSROOM_API_TOKEN"
SETTINGS_NAME = "classroom.json"
PASSWORD_FILE = "class-password"
INSTRUCTOR_PASSWORD_FILE = "instructor-password"
#: The shortest passwords JupyterHub's SharedPasswordAuthenticator accepts.
PASSWORD_MIN_LENGTH = {PASSWORD_FILE: 8, INSTRUCTOR_PASSWORD_FILE: 32}
#: Variables of the hub's environment its users' servers keep (JupyterHub drops all others), with
#: every ``DELTALAB_*`` one but the hub's secrets; the per-user ones are then set for each.
ENV_KEPT = ["JAVA_HOME", "LANG", "LC_ALL", "TMPDIR", "SPARK_MASTER", "SPARK_LOCAL_IP",
            "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"]
CONFIG_NAME = "jupyterhub_config.py"
#: The instructor's own JupyterHub settings, read after the classroom's (they win).
EXTRA_CONFIG_NAME = "jupyterhub_config_extra.py"
LOG_NAME = "jupyterhub.log"
SERVICE_NAME = "deltalab-classroom"
#: nbgrader's course id, as labs/nbgrader_config.py sets it (a test compares them).
COURSE_ID = "deltalab-labs"
#: How labs/nbgrader_config.py is told the exchange folder the classroom's users share.
EXCHANGE_ENV = "DELTALAB_NBGRADER_EXCHANGE"
#: The folder of a user's home that holds their nbgrader settings.
NBGRADER_CONFIG_DIR = ".deltalab-nbgrader"
#: JupyterHub's user names are lowercase; these also make safe folder names.
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_-]{0,31}")
DEFAULT_IDLE_TIMEOUT = 3600
#: Each user's Spark driver heap (``DELTALAB_DRIVER_MEMORY`` in their servers) unless the hub's
#: environment or ``start_classroom`` says otherwise: half the course's 2g; every notebook and lab
#: passes at 1g. A student running notebook 00 then takes 749 MiB proportional memory, 782 MiB
#: resident (which counts the shared class archive and libraries in full), 794 and 827 MiB at 2g
#: (tests/support/classroom_memory.py, with the course's Java options, SHORT_RUN_JAVA_OPTIONS).
CLASSROOM_DRIVER_MEMORY = "1g"


def activity_interval(idle_timeout: int) -> int:
    """Seconds between the reports of a server's activity to the hub, and between the idle culler's
    checks: JupyterHub's 300 (5 minutes) for the default hour, a quarter of a shorter timeout (at
    least 15 s), so that a student at work is never taken for idle because the hub heard late."""
    return max(15, min(300, idle_timeout // 4))


START_TIMEOUT = 120   # seconds for the hub to answer, and for a student's server to be ready
PROXY_TIMEOUT = 600   # seconds the proxy waits for a student's server to answer a request


def classroom_dir(environ: dict[str, str] | None = None) -> Path:
    """Where the classroom keeps its state: ``$DELTALAB_CLASSROOM_DIR``, else ``~/deltalab-classroom``."""
    environ = dict(os.environ if environ is None else environ)
    return Path(environ.get(CLASSROOM_DIR_ENV) or Path.home() / "deltalab-classroom")


def check_names(students: list[str], instructors: list[str]) -> None:
    """One clear error for a class list JupyterHub would refuse or that is ambiguous."""
    if not students:
        raise DeltaLabError("a classroom needs at least one student", "pass --students NAME,NAME,...")
    for name in [*students, *instructors]:
        if not NAME_PATTERN.fullmatch(name):
            raise DeltaLabError(
                f"{name!r} cannot be a user name of the classroom",
                "use lowercase letters, digits, '-' and '_', starting with a letter, at most 32 characters",
            )
    both = sorted(set(students) & set(instructors))
    if both:
        raise DeltaLabError(f"{', '.join(both)} is listed both as a student and as an instructor",
                            "give each name one role")
    everyone = [*students, *instructors]
    if len(set(everyone)) != len(everyone):
        raise DeltaLabError("a name appears twice in the class list", "list each student and instructor once")


def class_password(root: Path, kind: str = PASSWORD_FILE) -> str:
    """The password of ``kind`` (:data:`PASSWORD_FILE`, the students'; :data:`INSTRUCTOR_PASSWORD_FILE`)
    drawn for the classroom at ``root`` the first time, kept (readable by its owner only) in
    ``<root>/<kind>`` so that it stays the same when the hub is started again."""
    kept = root / kind
    if not kept.exists():
        kept.touch(mode=0o600)
        kept.write_text(secrets.token_urlsafe(PASSWORD_MIN_LENGTH[kind] + 4))
    return check_password(kept.read_text().strip(), kind, f"{kept}")


def check_password(password: str, kind: str, where: str) -> str:
    """``password`` if it is long enough for JupyterHub, else one clear error naming ``where`` it came from."""
    shortest = PASSWORD_MIN_LENGTH[kind]
    if len(password) < shortest:
        raise DeltaLabError(f"the {kind.replace('-', ' ')} in {where} has {len(password)} characters; "
                            f"JupyterHub wants at least {shortest}",
                            f"set a longer one there, or delete {where} to have one drawn" if where.startswith("/")
                            else f"set a longer one in {where}")
    return password


def home_of(root: Path, name: str) -> Path:
    """A user's home in the classroom: the single-user server starts there."""
    return root / "home" / name


def configure_hub(c: Any, settings_path: str | Path) -> None:
    """Fill JupyterHub's configuration object ``c`` from the settings :func:`start_classroom` wrote.

    Called by the ``jupyterhub_config.py`` it writes; the password and service token come from the
    hub's environment."""
    settings = json.loads(Path(settings_path).read_text())
    root = Path(settings["root"])
    bin_dir = Path(sys.executable).parent
    ip = settings["ip"]
    c.JupyterHub.bind_url = f"http://{ip}:{settings['port']}"
    c.JupyterHub.hub_ip = "127.0.0.1"
    c.JupyterHub.hub_port = settings["hub_port"]
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{settings['proxy_api_port']}"
    # The Python proxy gives up on a request its target has not answered in 20 s (Tornado's default),
    # with status 599. A kernel's websocket is answered only once the kernel has started, which on a
    # loaded machine (40 students opening notebook 00 at once, or CI) takes longer: a 599 from the proxy
    # failed a CI run. Ten minutes, as long as a cell may run, instead.
    c.ConfigurableHTTPProxy.command = [str(bin_dir / "configurable-http-proxy"),
                                       f"--proxy-timeout={PROXY_TIMEOUT * 1000}"]
    c.ConfigurableHTTPProxy.pid_file = str(root / "jupyterhub-proxy.pid")
    c.JupyterHub.db_url = f"sqlite:///{root / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(root / "jupyterhub_cookie_secret")

    c.JupyterHub.authenticator_class = "shared-password"
    c.SharedPasswordAuthenticator.user_password = os.environ[PASSWORD_ENV]
    c.SharedPasswordAuthenticator.admin_password = os.environ[INSTRUCTOR_PASSWORD_ENV]
    c.Authenticator.allowed_users = set(settings["students"]) | set(settings["instructors"])
    c.Authenticator.admin_users = set(settings["instructors"])
    c.Authenticator.allow_existing_users = False   # a name taken off the class list cannot log in again

    c.JupyterHub.spawner_class = "simple"
    c.SimpleLocalProcessSpawner.home_dir_template = str(home_of(root, "{username}"))
    c.Spawner.cmd = [str(bin_dir / "jupyterhub-singleuser")]
    c.Spawner.args = ["--allow-root"] if os.geteuid() == 0 else []
    c.Spawner.start_timeout = START_TIMEOUT
    c.Spawner.http_timeout = START_TIMEOUT
    secret = {PASSWORD_ENV, INSTRUCTOR_PASSWORD_ENV, API_TOKEN_ENV}
    c.Spawner.env_keep = ENV_KEPT + sorted(k for k in os.environ if k.startswith("DELTALAB_") and k not in secret)
    # In a thread: making a workspace copies the course, which would hold up every other login.
    c.Spawner.pre_spawn_hook = lambda spawner: asyncio.to_thread(prepare_server, spawner, settings)

    # The culler stops a server whose last activity the hub knows of is older than the timeout; the
    # hub hears of activity from the proxy and from each server at these intervals.
    interval = settings["activity_interval"]
    c.JupyterHub.last_activity_interval = interval   # each server's: JUPYTERHUB_ACTIVITY_INTERVAL (prepare_server)
    c.JupyterHub.activity_resolution = min(30, interval)   # reports closer than this are dropped (default 30 s)
    c.JupyterHub.services = [
        {"name": SERVICE_NAME, "api_token": os.environ[API_TOKEN_ENV]},
        {"name": "idle-culler",
         "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={settings['idle_timeout']}",
                     f"--cull-every={interval}"]},
    ]
    c.JupyterHub.load_roles = [
        {"name": SERVICE_NAME, "services": [SERVICE_NAME],
         "scopes": ["admin:users", "admin:servers", "tokens", "list:services", "read:services", "access:servers"]},
        {"name": "idle-culler", "services": ["idle-culler"],
         "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]},
    ]


def prepare_server(spawner: Any, settings: dict[str, Any]) -> None:
    """JupyterHub's ``pre_spawn_hook``: the user's workspace and environment before their server starts.

    A student gets the learner's JupyterLab on ``<home>/course`` (made or brought up to date from the
    course: the notebooks without outputs, the labs' student versions, never ``labs/source/``); an
    instructor gets the instructor's JupyterLab on ``<home>``, which holds their nbgrader course
    folder ``<home>/labs`` (a copy of the course's ``labs/``, made once). Both get a work directory
    ``<home>/work`` and nbgrader settings of their own (:func:`nbgrader_settings`)."""
    name = spawner.user.name
    root = Path(settings["root"])
    home = home_of(root, name)
    course = Path(settings["course"])
    role = "instructor" if name in settings["instructors"] else "learner"
    if role == "learner":
        workspace = home / "course"
        update_workspace(course, workspace)
    else:
        workspace = home
        copy_labs(course / "labs", home / "labs")
    (home / "work").mkdir(parents=True, exist_ok=True)
    nbgrader_dir = home / NBGRADER_CONFIG_DIR
    nbgrader_dir.mkdir(parents=True, exist_ok=True)
    (nbgrader_dir / "nbgrader_config.py").write_text(nbgrader_settings(root, name, role))
    config = jupyter_config_dir() / role
    bin_dir = Path(sys.executable).parent
    config_path = [str(config), str(nbgrader_dir), os.environ.get("JUPYTER_CONFIG_PATH")]
    spawner.notebook_dir = str(workspace)
    spawner.default_url = f"/lab/tree/{OPENS[role]}"
    environment = {
        WORKDIR_ENV: str(home / "work"),
        # The hub's cache: Delta's jars and the JVM class archive, downloaded and built once for the
        # machine, are shared by every student's JVM (which maps the archive rather than loading classes).
        CACHE_ENV: str(cache_root()),
        COURSE_DIR_ENV: str(course),
        EXCHANGE_ENV: str(root / "exchange"),
        "JUPYTER_CONFIG_PATH": os.pathsep.join(p for p in config_path if p),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / ".jupyterlab-workspaces"),
        "JUPYTERHUB_ACTIVITY_INTERVAL": str(settings["activity_interval"]),
        DRIVER_MEMORY_ENV: settings["driver_memory"],
        "PATH": os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]),
    }
    if role == "learner":
        environment[LEARNER_DIR_ENV] = str(workspace)
    # What the instructor's own settings (c.Spawner.environment) give wins.
    spawner.environment = {**environment, **dict(spawner.environment)}


def copy_labs(labs: Path, destination: Path) -> None:
    """An instructor's nbgrader course folder: the course's ``labs/`` (its settings, README, the
    labs' sources and student versions; nothing nbgrader wrote there), copied the first time only, so
    that the instructor's gradebook and changes are never overwritten."""
    if destination.exists():
        return
    with publishing(destination, directory=True) as partial:  # a copy an earlier start did not finish is removed
        for name in ["nbgrader_config.py", "README.md", "source", "release"]:
            if (labs / name).is_dir():
                shutil.copytree(labs / name, partial / name)
            elif (labs / name).is_file():
                shutil.copy2(labs / name, partial / name)


def nbgrader_settings(root: Path, name: str, role: str) -> str:
    """The ``nbgrader_config.py`` of a user of the classroom (on their ``JUPYTER_CONFIG_PATH``).

    Everyone: the course's id and the classroom's exchange folder, so that ``nbgrader
    fetch_assignment lab02_log`` and ``nbgrader submit lab02_log`` need no options. A student: their
    hub name as nbgrader's student id (the servers run as one system user, whose name nbgrader would
    take otherwise). An instructor: the course's ``labs/nbgrader_config.py`` (their copy: the cell
    timeout, the stub the checks know), then their course folder and gradebook, wherever they run
    nbgrader (the formgrader runs in their home), and no owner check when collecting (every
    submission belongs to the one system user)."""
    lines = ["# Written by deltalab.classroom when the server starts.",
             "c = get_config()  # noqa: F821"]
    labs = home_of(root, name) / "labs"
    if role == "instructor":
        lines.append(f"load_subconfig({str(labs / 'nbgrader_config.py')!r})  # noqa: F821")
    lines += [f"c.CourseDirectory.course_id = {COURSE_ID!r}",
              f"c.Exchange.root = {str(root / 'exchange')!r}"]
    if role == "learner":
        lines.append(f"c.CourseDirectory.student_id = {name!r}")
    else:
        lines += [f"c.CourseDirectory.root = {str(labs)!r}",
                  f"c.CourseDirectory.db_url = {'sqlite:///' + str(labs / 'gradebook.db')!r}",
                  "c.ExchangeCollect.check_owner = False"]
    return "\n".join(lines) + "\n"


@dataclass
class Classroom:
    """A running hub: its public ``url``, the students' ``password``, the instructors'
    ``instructor_password``, the service ``api_token``."""

    root: Path
    url: str
    password: str
    instructor_password: str
    api_token: str
    students: list[str]
    instructors: list[str]
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def api(self, method: str, path: str, token: str | None = None, **json_body: Any) -> Any:
        """Call the hub's REST API (``/hub/api/<path>``) with the service token (or ``token``); the
        decoded JSON answer, or None when there is none."""
        import requests

        response = requests.request(method, f"{self.url}/hub/api/{path.lstrip('/')}", timeout=60,
                                    headers={"Authorization": f"token {token or self.api_token}"},
                                    json=json_body or None)
        if response.status_code >= 400:
            raise DeltaLabError(f"the hub answered {method} /hub/api/{path} with {response.status_code}: "
                                f"{response.text[:300]}", f"see the hub's log, {self.root / LOG_NAME}")
        return response.json() if response.content else None

    def stop(self, timeout: float = 60) -> None:
        """Stop the hub as Ctrl-C would (it stops the users' servers and its proxy and records that
        in its database), then end whatever of it is left after ``timeout`` seconds."""
        if self.process is None:
            return
        for hub in [p for p in process_tree(self.process.pid) if p.parent == self.process.pid]:
            try:
                os.kill(hub.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        end_process(self.process, timeout=timeout)
        self.process = None


def start_classroom(
    students: list[str],
    instructors: list[str] | None = None,
    *,
    root: str | Path | None = None,
    ip: str = "127.0.0.1",
    port: int | None = None,
    password: str | None = None,
    instructor_password: str | None = None,
    idle_timeout: int = DEFAULT_IDLE_TIMEOUT,
    course: str | Path | None = None,
    driver_memory: str | None = None,
) -> Classroom:
    """Start JupyterHub for ``students`` and ``instructors`` on ``ip``:``port`` (a free port of
    127.0.0.1 by default) and wait until it answers; the :class:`Classroom` to drive and stop it.

    ``root`` holds the hub's state and the users' homes (default :func:`classroom_dir`; not inside the
    course); ``password`` (students') defaults to ``$DELTALAB_CLASSROOM_PASSWORD``, else
    :func:`class_password`, and so does ``instructor_password`` (at least 32 characters; it must
    differ); ``course`` is the folder with ``notebooks/`` and ``labs/`` (default: this checkout, or
    ``$DELTALAB_COURSE_DIR``); ``driver_memory`` is every user's Spark driver heap (default
    ``$DELTALAB_DRIVER_MEMORY``, else :data:`CLASSROOM_DRIVER_MEMORY`)."""
    instructors = list(instructors or [])
    check_names(students, instructors)
    if driver_memory is not None:
        driver_memory = check_driver_memory(driver_memory, "the driver_memory argument", CLASSROOM_DRIVER_MEMORY)
    elif os.environ.get(DRIVER_MEMORY_ENV):
        driver_memory = check_driver_memory(os.environ[DRIVER_MEMORY_ENV], DRIVER_MEMORY_ENV, CLASSROOM_DRIVER_MEMORY)
    else:
        driver_memory = CLASSROOM_DRIVER_MEMORY
    if idle_timeout < 60:
        raise DeltaLabError(f"idle_timeout={idle_timeout} s would stop students' servers while they read",
                            "give at least 60 seconds (the default is an hour)")
    root = Path(root if root is not None else classroom_dir()).absolute()
    course = Path(course if course is not None else course_root()).absolute()
    if not (course / "notebooks").is_dir():
        raise DeltaLabError(f"{course} has no notebooks/ folder", "pass the course's folder (--course DIR)")
    missing = missing_labs(course) if instructors else []
    if missing:
        # An instructor's course folder is copied once: without the sources it would stay without them.
        raise DeltaLabError(f"{course} has no {missing[0].relative_to(course)}, which the instructors' course "
                            "folders are copied from",
                            "start the classroom from a checkout, or, in the course image (which never holds the "
                            "solutions), mount your checkout's labs/source at "
                            f"{course / 'labs' / 'source'} (make -C docker classroom does)")
    if root == course or course in root.parents:
        raise DeltaLabError(f"the classroom's folder {root} is inside the course",
                            f"give a folder outside {course} (--root DIR, or {CLASSROOM_DIR_ENV})")
    root.mkdir(parents=True, exist_ok=True)
    (root / "exchange").mkdir(exist_ok=True)   # nbgrader's formgrader offers Release only once it exists
    password = check_password(password or os.environ.get(PASSWORD_ENV) or class_password(root),
                              PASSWORD_FILE, PASSWORD_ENV)
    instructor_password = check_password(
        instructor_password or os.environ.get(INSTRUCTOR_PASSWORD_ENV) or class_password(root, INSTRUCTOR_PASSWORD_FILE),
        INSTRUCTOR_PASSWORD_FILE, INSTRUCTOR_PASSWORD_ENV)
    if password == instructor_password:
        raise DeltaLabError("the students' and the instructors' passwords are the same",
                            f"set different ones in {PASSWORD_ENV} and {INSTRUCTOR_PASSWORD_ENV}")
    api_token = secrets.token_hex(32)
    port = port or free_loopback_port()
    settings = {
        "root": str(root), "course": str(course), "ip": ip, "port": port,
        "hub_port": free_loopback_port(), "proxy_api_port": free_loopback_port(),
        "students": students, "instructors": instructors, "idle_timeout": idle_timeout,
        "activity_interval": activity_interval(idle_timeout), "driver_memory": driver_memory,
    }
    (root / SETTINGS_NAME).write_text(json.dumps(settings, indent=1))
    config = root / CONFIG_NAME
    extra = root / EXTRA_CONFIG_NAME
    config.write_text("# Written by deltalab.classroom at each start: the settings are in classroom.json next to\n"
                      f"# this file; put your own (an authenticator, announcements) in {EXTRA_CONFIG_NAME}.\n"
                      "import os\n\nfrom deltalab.classroom import configure_hub\n\n"
                      f"configure_hub(c, {str(root / SETTINGS_NAME)!r})  # noqa: F821 (c: JupyterHub's config)\n"
                      f"if os.path.exists({str(extra)!r}):\n"
                      f"    load_subconfig({str(extra)!r})  # noqa: F821 (traitlets gives config files this function)\n")
    # TZ=UTC: the Python proxy stamps a route's activity with a local time without a zone, which the hub
    # reads as UTC; east of Greenwich every server would look active hours ahead and never be culled.
    # The servers do not inherit it (JupyterHub passes them only ENV_KEPT and DELTALAB_* settings).
    env = dict(os.environ, TZ="UTC", **{PASSWORD_ENV: password, INSTRUCTOR_PASSWORD_ENV: instructor_password,
                                        API_TOKEN_ENV: api_token})
    jupyterhub = Path(sys.executable).parent / "jupyterhub"
    if not jupyterhub.exists():
        raise DeltaLabError(f"there is no jupyterhub next to {sys.executable}",
                            "run `make setup`, or install the classroom extra: pip install -c requirements.lock '.[classroom]'")
    process = start_owned([str(jupyterhub), "-f", str(config)], root / LOG_NAME, ends_on_interrupt=False, env=env)
    classroom = Classroom(root, f"http://{'127.0.0.1' if ip in ('0.0.0.0', '') else ip}:{port}", password,
                          instructor_password, api_token, students, instructors, process)
    try:
        wait_until(lambda: _answers(classroom), START_TIMEOUT, f"JupyterHub to answer on {classroom.url}", interval=0.5)
    except BaseException:
        classroom.stop()
        raise
    return classroom


def _answers(classroom: Classroom) -> bool:
    """True once the hub answers through its proxy; a clear error if it exited instead."""
    import requests

    if classroom.process is not None and classroom.process.poll() is not None:
        log = (classroom.root / LOG_NAME).read_text(errors="replace")[-2000:]
        raise DeltaLabError(f"JupyterHub exited at start (status {classroom.process.returncode}); its log ends:\n{log}",
                            f"fix what the log names; the whole log is {classroom.root / LOG_NAME}")
    try:
        return requests.get(f"{classroom.url}/hub/api/", timeout=5).status_code == 200
    except requests.RequestException:   # not listening yet, or too busy to answer in time (wait_until waits)
        return False
