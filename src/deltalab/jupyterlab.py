"""JupyterLab for one of the course's roles, built in one place for ``make lab`` and the image.

``make lab`` / ``make instructor`` on a checkout and the course image's ``lab`` role
(``docker/entrypoint.sh``) both run ``python -m deltalab lab``, which starts what
:func:`lab_launch` builds:

* the role's Jupyter settings, a folder of ``src/deltalab/jupyter/`` (the image copies it to
  ``$DELTALAB_JUPYTER_CONFIG``), first on ``JUPYTER_CONFIG_PATH``, so they win over the
  environment's and ``~/.jupyter``'s without writing to either;
* the folder served: for the learner, their workspace outside the repository
  (:mod:`deltalab.workspace`: the notebooks without outputs and the labs' student versions, made
  or brought up to date from the course before JupyterLab starts); for the instructor, the course;
* the working directory: the learner's workspace; ``labs/`` for the instructor, because
  nbgrader reads ``labs/nbgrader_config.py`` and ``labs/gradebook.db`` from there;
* the file it opens: the course index, or the labs' README for the instructor; it is also the
  page of the URL JupyterLab prints (``--LabApp.default_url``), so a learner without a browser
  on this machine who copies that URL lands on the course index, not on the Launcher;
* this Python's ``bin/`` first on ``PATH`` (nbgrader runs ``alembic`` by name);
* a JupyterLab workspace folder per role (:func:`workspaces_dir`), so that the instructor's
  JupyterLab does not reopen the learner's tabs and start their kernels, nor the other way round.

The token never goes on the command line (where ``ps`` shows it): jupyter_server reads it from
``JUPYTER_TOKEN`` in the environment, or generates one and prints it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from deltalab.errors import DeltaLabError
from deltalab.locations import repo_root
from deltalab.workspace import learner_dir

#: Who JupyterLab is for, and the file each opens (relative to the course root).
OPENS = {"learner": "notebooks/README.md", "instructor": "labs/README.md"}
ROLES = tuple(OPENS)
#: The working directory of each role, relative to the folder served.
WORKING_DIRS = {"learner": ".", "instructor": "labs"}
#: The course root when ``--root`` is not given (the image sets it).
COURSE_DIR_ENV = "DELTALAB_COURSE_DIR"
#: The folder holding one settings folder per role, when it is not the package's own ``jupyter/``.
JUPYTER_CONFIG_ENV = "DELTALAB_JUPYTER_CONFIG"
DEFAULT_IP = "127.0.0.1"
DEFAULT_PORT = 8888


@dataclass(frozen=True)
class LabLaunch:
    """Everything that starting JupyterLab for a role takes: run ``argv`` in ``cwd`` with ``env``.
    ``served`` is the folder JupyterLab serves (the learner's workspace, or the ``course``);
    ``opens`` the file it opens, relative to ``served`` (its URL is ``/lab/tree/<opens>``)."""

    role: str
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    opens: str
    course: Path
    served: Path


def course_root(environ: Mapping[str, str] | None = None) -> Path:
    """The folder JupyterLab serves when none is given: ``$DELTALAB_COURSE_DIR`` (the image),
    else the repository this package was installed from (a checkout)."""
    environ = os.environ if environ is None else environ
    if environ.get(COURSE_DIR_ENV):
        return Path(environ[COURSE_DIR_ENV])
    root = repo_root()
    if root is None:
        raise DeltaLabError(
            "there is no course folder to serve: this package is not installed from a checkout, "
            f"and {COURSE_DIR_ENV} is not set",
            f"pass the folder that holds notebooks/ (python -m deltalab lab --root DIR), or set {COURSE_DIR_ENV}",
        )
    return root


def jupyter_config_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The folder with one Jupyter settings folder per role: ``$DELTALAB_JUPYTER_CONFIG`` (the
    image's copy), else the package's own ``jupyter/`` (``src/deltalab/jupyter`` in a checkout)."""
    environ = os.environ if environ is None else environ
    if environ.get(JUPYTER_CONFIG_ENV):
        return Path(environ[JUPYTER_CONFIG_ENV])
    return Path(__file__).resolve().with_name("jupyter")


def workspaces_dir(role: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where JupyterLab keeps the open tabs and layout of ``role`` (``JUPYTERLAB_WORKSPACES_DIR``):
    ``$XDG_DATA_HOME/deltalab/workspaces/<role>`` (``~/.local/share/...`` by default), outside the
    repository and apart from the other role's and from JupyterLab's own default."""
    environ = os.environ if environ is None else environ
    data_home = environ.get("XDG_DATA_HOME") or str(Path(environ.get("HOME") or Path.home()) / ".local" / "share")
    return Path(data_home) / "deltalab" / "workspaces" / role


def _module_installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _first_on(first: str, search_path: str | None) -> str:
    """``first``, then the search path that was set, if any (``os.pathsep`` between)."""
    return os.pathsep.join([first, search_path]) if search_path else first


def missing_labs(root: Path) -> list[Path]:
    """What an instructor needs of the course at ``root`` and it lacks: the labs' nbgrader settings
    and their sources (the solutions, which the course image never holds)."""
    return [path for path in (root / "labs" / "nbgrader_config.py", root / "labs" / "source") if not path.exists()]


def check_role(role: str, root: Path, config_dir: Path) -> None:
    """Refuse, with the fix, what would start a JupyterLab that does not work for the role: an
    unknown role, a role without its settings folder, an instructor without nbgrader or without
    the labs, and a root without the file the role opens (not the course's folder)."""
    if role not in ROLES:
        raise DeltaLabError(
            f"{role!r} is not a JupyterLab role (the roles are {', '.join(ROLES)})",
            "run `make lab` (learner) or `make instructor`; in the course image, leave DELTALAB_ROLE unset "
            "(learner) or set it to instructor",
        )
    if not (config_dir / role).is_dir():
        raise DeltaLabError(
            f"there are no Jupyter settings for the {role} in {config_dir / role}",
            f"set {JUPYTER_CONFIG_ENV} to a copy of src/deltalab/jupyter (the folder with learner/ and instructor/), "
            "or unset it to use the package's own",
        )
    if role == "instructor":
        if not _module_installed("nbgrader"):
            raise DeltaLabError(
                f"the instructor's JupyterLab needs nbgrader, which is not installed in this Python ({sys.prefix})",
                "from a checkout, run `make instructor` (`make setup` installs nbgrader); or install it with "
                "`pip install -c requirements.lock nbgrader`",
            )
        missing = missing_labs(root)
        if missing:
            raise DeltaLabError(
                f"the instructor's JupyterLab needs the labs, and {missing[0]} does not exist",
                f"serve a checkout's root (--root), or, in the course image (which never holds the solutions), "
                f"mount your checkout's labs/source at {root / 'labs' / 'source'}",
            )
    if not (root / OPENS[role]).is_file():
        raise DeltaLabError(
            f"{root} is not the course's folder: it has no {OPENS[role]}",
            f"pass the folder that holds notebooks/ and labs/ (--root DIR, or {COURSE_DIR_ENV})",
        )


def lab_launch(
    role: str = "learner",
    *,
    root: str | Path | None = None,
    ip: str = DEFAULT_IP,
    port: int = DEFAULT_PORT,
    browser: bool = True,
    extra_args: list[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> LabLaunch:
    """The command line, environment and working directory of JupyterLab for ``role``, after
    :func:`check_role`.

    ``root`` is the course's folder (default :func:`course_root`), which the instructor's JupyterLab
    serves; the learner's serves their workspace (:func:`deltalab.workspace.learner_dir`), which
    :func:`deltalab.workspace.update_workspace` makes from the course before the start; ``environ`` the environment it
    starts from (default this process's), which keeps ``JUPYTER_TOKEN`` if set; ``browser=False``
    adds ``--no-browser``. As root (a CI machine, a container), ``--allow-root`` is added, without
    which jupyter refuses to start. Without a ``JUPYTER_TOKEN``, the server logs warnings only: the block
with the URL (and the token jupyter made) is then what it prints; with one, jupyter shows the URL only
in its start-up lines, so they stay. ``extra_args`` go to ``jupyter lab`` before the file it opens.
    """
    environ = dict(os.environ if environ is None else environ)
    root = Path(root if root is not None else course_root(environ)).absolute()
    config_dir = jupyter_config_dir(environ)
    check_role(role, root, config_dir)
    served = learner_dir(environ) if role == "learner" else root
    bin_dir = Path(sys.executable).parent
    jupyter = bin_dir / "jupyter"
    if not jupyter.exists():
        raise DeltaLabError(
            f"there is no jupyter next to {sys.executable}",
            "run `make setup`, or install the course extra: pip install -c requirements.lock '.[course]'",
        )
    env = dict(environ, JUPYTER_CONFIG_PATH=_first_on(str(config_dir / role), environ.get("JUPYTER_CONFIG_PATH")),
               PATH=_first_on(str(bin_dir), environ.get("PATH")))
    env.setdefault("JUPYTERLAB_WORKSPACES_DIR", str(workspaces_dir(role, environ)))  # one set by hand wins
    argv = [str(jupyter), "lab", f"--ip={ip}", f"--port={port}", f"--ServerApp.root_dir={served}",
            f"--LabApp.default_url=/lab/tree/{OPENS[role]}"]
    argv += [] if browser else ["--no-browser"]
    argv += ["--allow-root"] if _is_root() else []
    if not environ.get("JUPYTER_TOKEN"):   # jupyter prints its own token's URL in a warning-level block: the start-up lines can go
        argv += ["--ServerApp.log_level=WARN"]
    argv += list(extra_args or []) + [str(served / OPENS[role])]
    return LabLaunch(role, argv, env, served / WORKING_DIRS[role], OPENS[role], root, served)


def exec_lab(launch: LabLaunch) -> None:
    """Replace this process with JupyterLab, so that signals (Ctrl-C, ``docker stop``) reach it."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.chdir(launch.cwd)
    os.execve(launch.argv[0], launch.argv, launch.env)
