"""A classroom on one machine: JupyterHub with the course for every student (``make classroom``).

An instructor with 40 students cannot ask each of them to install Java, Python and the course.
With a hub, each student logs in with a browser and gets a JupyterLab of their own, the learner's
one of ``make lab``: a workspace with the course's notebooks (outputs cleared) and the labs' student
versions (:mod:`deltalab.workspace`), and a work directory (``DELTALAB_WORKDIR``) of their own.
:func:`start_classroom` starts it, from packages (the ``classroom`` extra), on 127.0.0.1:

* JupyterHub, with the proxy it starts itself: the Python ``configurable-http-proxy`` (no Node);
* one single-user JupyterLab per student, started by JupyterHub's ``SimpleLocalProcessSpawner`` as
  the hub's own system user, in ``<root>/home/<name>``: enough for one machine a class trusts, not
  an isolation between students (see the README's classroom section for one system user or
  container per student: ``LocalProcessSpawner``, DockerSpawner, the Kubernetes chart);
* a password for the class (``DummyAuthenticator``, limited to the class list), from
  ``DELTALAB_CLASSROOM_PASSWORD``, else drawn once and kept in ``<root>/class-password``;
  instructors are the hub's admins;
* the idle culler, a hub service that stops a server idle for ``idle_timeout`` seconds, so that a
  student who left frees the memory of their kernels and Spark drivers;
* a service token (``Classroom.api_token``, never on a command line) with which this module, its
  tests and an instructor's scripts drive the hub's REST API: start a student's server, make a
  student's token.

Everything the hub writes (its database, cookie secret, proxy pid file, log, the students' homes)
goes under ``root``. ``jupyterhub -f <root>/jupyterhub_config.py`` reads the settings back through
:func:`configure_hub`, then the instructor's own ``<root>/jupyterhub_config_extra.py`` if there is
one (a real authenticator, an announcement): what it sets wins.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deltalab.errors import DeltaLabError
from deltalab.jupyterlab import COURSE_DIR_ENV, OPENS, course_root, jupyter_config_dir
from deltalab.locations import CACHE_ENV, WORKDIR_ENV, cache_root
from deltalab.processes import end_process, free_loopback_port, start_owned, wait_until
from deltalab.workspace import LEARNER_DIR_ENV, update_workspace

#: The classroom's folder when none is given: ``$DELTALAB_CLASSROOM_DIR``, else ``~/deltalab-classroom``.
CLASSROOM_DIR_ENV = "DELTALAB_CLASSROOM_DIR"
#: The class's password, when it is not drawn.
PASSWORD_ENV = "DELTALAB_CLASSROOM_PASSWORD"
#: How the hub process receives the service token (the environment, not the command line).
API_TOKEN_ENV = "DELTALAB_CLASSROOM_API_TOKEN"
SETTINGS_NAME = "classroom.json"
PASSWORD_FILE = "class-password"
CONFIG_NAME = "jupyterhub_config.py"
#: The instructor's own JupyterHub settings, read after the classroom's (they win).
EXTRA_CONFIG_NAME = "jupyterhub_config_extra.py"
LOG_NAME = "jupyterhub.log"
SERVICE_NAME = "deltalab-classroom"
#: JupyterHub's user names are lowercase; these also make safe folder names.
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_-]{0,31}")
DEFAULT_IDLE_TIMEOUT = 3600
START_TIMEOUT = 120   # seconds for the hub to answer, and for a student's server to be ready


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


def class_password(root: Path) -> str:
    """The password drawn for the classroom at ``root`` the first time, kept (readable by its owner
    only) in ``<root>/class-password`` so that it stays the same when the hub is started again."""
    kept = root / PASSWORD_FILE
    if not kept.exists():
        kept.touch(mode=0o600)
        kept.write_text(secrets.token_urlsafe(9))
    return kept.read_text().strip()


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
    c.ConfigurableHTTPProxy.command = [str(bin_dir / "configurable-http-proxy")]
    c.ConfigurableHTTPProxy.pid_file = str(root / "jupyterhub-proxy.pid")
    c.JupyterHub.db_url = f"sqlite:///{root / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(root / "jupyterhub_cookie_secret")

    c.JupyterHub.authenticator_class = "dummy"
    c.DummyAuthenticator.password = os.environ[PASSWORD_ENV]
    c.Authenticator.allowed_users = set(settings["students"]) | set(settings["instructors"])
    c.Authenticator.admin_users = set(settings["instructors"])

    c.JupyterHub.spawner_class = "simple"
    c.SimpleLocalProcessSpawner.home_dir_template = str(home_of(root, "{username}"))
    c.Spawner.cmd = [str(bin_dir / "jupyterhub-singleuser")]
    c.Spawner.args = ["--allow-root"] if os.geteuid() == 0 else []
    c.Spawner.start_timeout = START_TIMEOUT
    c.Spawner.http_timeout = START_TIMEOUT
    c.Spawner.pre_spawn_hook = lambda spawner: prepare_server(spawner, settings)

    c.JupyterHub.services = [
        {"name": SERVICE_NAME, "api_token": os.environ[API_TOKEN_ENV]},
        {"name": "idle-culler",
         "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={settings['idle_timeout']}"]},
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
    course: the notebooks without outputs, the labs' student versions, never ``labs/source/``) and a
    work directory ``<home>/work``; an instructor gets the instructor's JupyterLab on the course itself."""
    name = spawner.user.name
    home = home_of(Path(settings["root"]), name)
    course = Path(settings["course"])
    role = "instructor" if name in settings["instructors"] else "learner"
    workspace = course if role == "instructor" else home / "course"
    if role == "learner":
        update_workspace(course, workspace)
    (home / "work").mkdir(parents=True, exist_ok=True)
    config = jupyter_config_dir() / role
    bin_dir = Path(sys.executable).parent
    spawner.notebook_dir = str(workspace)
    spawner.default_url = f"/lab/tree/{OPENS[role]}"
    spawner.environment = {
        WORKDIR_ENV: str(home / "work"),
        # The hub's cache: Delta's jars and the JVM class archive, downloaded and built once for the
        # machine, are shared by every student's JVM (which maps the archive rather than loading classes).
        CACHE_ENV: str(cache_root()),
        COURSE_DIR_ENV: str(course),
        LEARNER_DIR_ENV: str(workspace),
        "JUPYTER_CONFIG_PATH": os.pathsep.join(p for p in [str(config), os.environ.get("JUPYTER_CONFIG_PATH")] if p),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / ".jupyterlab-workspaces"),
        "PATH": os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]),
    }


@dataclass
class Classroom:
    """A running hub: its public ``url``, the ``password`` of the class, the service ``api_token``."""

    root: Path
    url: str
    password: str
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

    def start_server(self, name: str, timeout: float = START_TIMEOUT) -> str:
        """Start ``name``'s JupyterLab (if it is not running) and wait until the hub says it is ready;
        its URL."""
        if not self.api("GET", f"users/{name}").get("servers", {}).get("", {}).get("ready"):
            self.api("POST", f"users/{name}/server")
        wait_until(lambda: self.api("GET", f"users/{name}").get("servers", {}).get("", {}).get("ready", False),
                   timeout, f"{name}'s JupyterLab to start (log: {self.root / LOG_NAME})", interval=0.5)
        return f"{self.url}/user/{name}/"

    def user_token(self, name: str, note: str = "deltalab classroom") -> str:
        """A new API token of ``name``'s (what a student's scripts would use)."""
        return str(self.api("POST", f"users/{name}/tokens", note=note, expires_in=24 * 3600)["token"])

    def stop(self) -> None:
        """Stop the hub; it stops the students' servers and its proxy first."""
        if self.process is not None:
            end_process(self.process, timeout=60)
            self.process = None


def start_classroom(
    students: list[str],
    instructors: list[str] | None = None,
    *,
    root: str | Path | None = None,
    ip: str = "127.0.0.1",
    port: int | None = None,
    password: str | None = None,
    idle_timeout: int = DEFAULT_IDLE_TIMEOUT,
    course: str | Path | None = None,
) -> Classroom:
    """Start JupyterHub for ``students`` and ``instructors`` on ``ip``:``port`` (a free port of
    127.0.0.1 by default) and wait until it answers; the :class:`Classroom` to drive and stop it.

    ``root`` holds the hub's state and the users' homes (default :func:`classroom_dir`); ``password``
    defaults to ``$DELTALAB_CLASSROOM_PASSWORD``, else :func:`class_password`; ``course`` is the folder with
    ``notebooks/`` and ``labs/release/`` (default: this checkout, or ``$DELTALAB_COURSE_DIR``)."""
    instructors = list(instructors or [])
    check_names(students, instructors)
    if idle_timeout < 60:
        raise DeltaLabError(f"idle_timeout={idle_timeout} s would stop students' servers while they read",
                            "give at least 60 seconds (the default is an hour)")
    root = Path(root if root is not None else classroom_dir()).absolute()
    course = Path(course if course is not None else course_root()).absolute()
    if not (course / "notebooks").is_dir():
        raise DeltaLabError(f"{course} has no notebooks/ folder", "pass the course's folder (--course DIR)")
    root.mkdir(parents=True, exist_ok=True)
    password = password or os.environ.get(PASSWORD_ENV) or class_password(root)
    api_token = secrets.token_hex(32)
    port = port or free_loopback_port()
    settings = {
        "root": str(root), "course": str(course), "ip": ip, "port": port,
        "hub_port": free_loopback_port(), "proxy_api_port": free_loopback_port(),
        "students": students, "instructors": instructors, "idle_timeout": idle_timeout,
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
    env = dict(os.environ, **{PASSWORD_ENV: password, API_TOKEN_ENV: api_token})
    jupyterhub = Path(sys.executable).parent / "jupyterhub"
    if not jupyterhub.exists():
        raise DeltaLabError(f"there is no jupyterhub next to {sys.executable}",
                            "run `make setup`, or install the classroom extra: pip install -c requirements.lock '.[classroom]'")
    process = start_owned([str(jupyterhub), "-f", str(config)], root / LOG_NAME, ends_on_interrupt=False, env=env)
    classroom = Classroom(root, f"http://{'127.0.0.1' if ip in ('0.0.0.0', '') else ip}:{port}", password,
                          api_token, students, instructors, process)
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
    except requests.ConnectionError:
        time.sleep(0.1)
        return False
