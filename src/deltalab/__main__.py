"""The course's command line: ``python -m deltalab doctor | fetch-jars | execute | grade | bench | lab | workspace | cluster``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from deltalab.errors import DeltaLabError


def _at_least_one(text: str) -> int:
    """An argparse type: a whole number of 1 or more (a median of no runs is no figure)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deltalab", description="Tools for the Delta Lake internals course.")
    commands = parser.add_subparsers(dest="command", required=True)
    doctor = commands.add_parser("doctor", help="check Python, Java, packages, Delta jars and the work directory")
    doctor.add_argument("--smoke", action="store_true", help="also start Spark and write a tiny Delta table")
    doctor.add_argument("--quiet", action="store_true", help="print only the checks that fail (what make lab runs)")
    fetch = commands.add_parser("fetch-jars", help="download Delta's jars and the S3A jars into the cache once (needs the "
                                "network), then build the JVM class archive that makes sessions start faster")
    fetch.add_argument("--no-archive", action="store_true", help="skip the class archive (about 200 MB, 40 s to build)")
    fetch.add_argument("--quiet", action="store_true", help="say nothing when everything is already cached")
    execute = commands.add_parser("execute", help="run notebooks in place so that their stored outputs are fresh")
    execute.add_argument("notebooks", nargs="+")
    grade = commands.add_parser("grade", help="grade a folder of submitted lab notebooks (<student>.ipynb) into a CSV")
    grade.add_argument("lab", help="lab id, e.g. lab02_log")
    grade.add_argument("folder", type=Path, nargs="?", default=None,
                       help="folder with one <student_id>.ipynb per student (default: ~/deltalab-submissions/LAB, "
                            "or $DELTALAB_SUBMISSIONS/LAB)")
    grade.add_argument("--course", type=Path, default=Path("labs"), help="the labs course directory")
    grade.add_argument("--out", type=Path, default=None, help="CSV path (default labs/grades/LAB.csv)")
    bench = commands.add_parser("bench", help="measure cold start (plain Spark vs Delta) and every notebook's cells")
    bench.add_argument("notebooks", nargs="*", help="notebooks to time (default: all of notebooks/)")
    bench.add_argument("--repeat", type=_at_least_one, default=3, help="cold starts of each kind (default 3)")
    bench.add_argument("--skip-notebooks", action="store_true", help="only the cold-start comparison")
    lab = commands.add_parser("lab", help="start JupyterLab for a role: what `make lab`, `make instructor` and the "
                              "course image run (the token comes from JUPYTER_TOKEN, else jupyter prints one)")
    lab.add_argument("--role", default="learner", metavar="{learner,instructor}",
                     help="learner (the default): the course index, no grading tools; instructor: nbgrader, labs/ open")
    lab.add_argument("--ip", default="127.0.0.1", help="the address to listen on (default 127.0.0.1: this machine only)")
    lab.add_argument("--port", type=int, default=8888, metavar="N", help="default 8888 (JupyterLab moves on if it is taken)")
    lab.add_argument("--no-browser", action="store_true", help="do not open a browser")
    lab.add_argument("--root", type=Path, default=None, metavar="DIR",
                     help="the course folder to serve (default: $DELTALAB_COURSE_DIR, else this package's checkout)")
    lab.add_argument("--check", action="store_true", help="only check that the role can start (nbgrader and labs/ for "
                     "the instructor) and print the file it opens, relative to the root")
    lab.add_argument("jupyter_args", nargs="*", metavar="-- JUPYTER_OPTION", help="more options for jupyter lab")
    workspace = commands.add_parser("workspace", help="the learner's copy of the course that `make lab` serves "
                                    "(~/deltalab-course, or $DELTALAB_LEARNER_DIR): update it, reset a file, show where")
    workspace.add_argument("action", choices=["update", "reset", "where"],
                           help="update: copy what the course added or changed, keeping the files you changed; "
                           "reset FILE...: the course's version again (yours goes to backups/); where: print its path")
    workspace.add_argument("files", nargs="*", metavar="FILE", help="for reset: e.g. notebooks/02_the_transaction_log.ipynb")
    workspace.add_argument("--root", type=Path, default=None, metavar="DIR",
                           help="the course folder (default: $DELTALAB_COURSE_DIR, else this package's checkout)")
    cluster = commands.add_parser("cluster", help="start a Spark standalone master and worker on 127.0.0.1 and keep them "
                                  "running until Ctrl-C; print the SPARK_MASTER that points notebooks at them")
    cluster.add_argument("--cores", type=_at_least_one, default=4, help="cores the worker offers (default 4)")
    cluster.add_argument("--memory", default="4g", help="memory the worker offers (default 4g)")
    cluster.add_argument("--dir", type=Path, default=None, metavar="DIR",
                         help="logs and the worker's work directory (default: _cluster under the work root)")
    classroom = commands.add_parser("classroom", help="start JupyterHub with the course for a class on this machine "
                                    "(what `make classroom` runs) and keep it running until Ctrl-C")
    classroom.add_argument("--students", type=_names, required=True, metavar="NAME,NAME,...",
                           help="the students' user names (lowercase letters, digits, - and _)")
    classroom.add_argument("--instructors", type=_names, default=[], metavar="NAME,...",
                           help="the instructors' user names: the hub's admins, with the instructor's JupyterLab")
    classroom.add_argument("--ip", default="127.0.0.1", help="the address to listen on (default 127.0.0.1: this "
                           "machine only; see the README's classroom section before opening it to a network)")
    classroom.add_argument("--port", type=int, default=8000, metavar="N", help="default 8000")
    classroom.add_argument("--root", type=Path, default=None, metavar="DIR", help="the hub's state and the users' "
                           "homes (default: $DELTALAB_CLASSROOM_DIR, else ~/deltalab-classroom)")
    classroom.add_argument("--idle-timeout", type=int, default=3600, metavar="SECONDS",
                           help="stop a server idle this long, freeing its memory (default 3600)")
    classroom.add_argument("--driver-memory", default=None, metavar="SIZE",
                           help="each user's Spark driver heap (default: $DELTALAB_DRIVER_MEMORY, else 1g)")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except DeltaLabError as error:
        print(f"deltalab: {error}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    if args.command == "doctor":
        from deltalab.doctor import main as doctor_main

        return doctor_main(smoke=args.smoke, quiet=args.quiet)
    if args.command == "fetch-jars":
        from concurrent.futures import ThreadPoolExecutor

        from deltalab.jars import JAR_SETS, fetch_jars, jar_dir, jar_set

        # The sets download side by side: each is an Ivy resolution in its own JVM, waiting on Maven Central
        # most of its time (on a fresh machine 18 s and 14 s one after the other).
        with ThreadPoolExecutor(len(JAR_SETS)) as pool:
            fetched = dict(zip(JAR_SETS, pool.map(fetch_jars, JAR_SETS)))
        for name, jars in fetched.items():
            if not args.quiet:
                print(f"{len(jars)} jars ({jar_set(name).what}) cached in {jar_dir(name)}")
        if not args.no_archive:
            from deltalab.class_archive import build_archive
            from deltalab.jars import session_jars
            from deltalab.java import find_java

            archive = build_archive(session_jars(fetch_jars("delta")), find_java().home)
            if not args.quiet:
                print(f"JVM class archive: {archive}")
        return 0
    if args.command == "cluster":
        return _serve_cluster(args.cores, args.memory, args.dir)
    if args.command == "classroom":
        return _serve_classroom(args)
    if args.command == "bench":
        from deltalab.bench import main as bench_main

        return bench_main(args.repeat, args.notebooks, args.skip_notebooks)
    if args.command == "lab":
        return _lab(args)
    if args.command == "workspace":
        return _workspace(args)
    if args.command == "grade":
        from deltalab.labs.grading import grade_folder, submissions_folder

        grade_folder(args.lab, args.folder or submissions_folder(args.lab), args.course, args.out)
        return 0
    from deltalab.notebook import execute_in_place

    for notebook in args.notebooks:
        seconds = execute_in_place(notebook)
        print(f"{notebook}: executed in {seconds:.0f} s")
    return 0


def _lab(args: argparse.Namespace) -> int:
    """Check the role, then (unless only checking) become its JupyterLab; returns only with --check."""
    from deltalab.jupyterlab import exec_lab, lab_launch

    launch = lab_launch(args.role, root=args.root, ip=args.ip, port=args.port, browser=not args.no_browser,
                        extra_args=args.jupyter_args)
    if args.check:
        print(launch.opens)
        return 0
    if launch.role == "learner":
        from deltalab.workspace import update_workspace

        print(update_workspace(launch.course, launch.served).summary(), flush=True)
    exec_lab(launch)
    return 0  # not reached: exec_lab replaces this process


def _workspace(args: argparse.Namespace) -> int:
    """``python -m deltalab workspace update | reset FILE... | where``."""
    from deltalab.jupyterlab import course_root
    from deltalab.workspace import learner_dir, reset_file, update_workspace

    if args.action == "where":
        print(learner_dir())
        return 0
    course = args.root if args.root is not None else course_root()
    if args.action == "update":
        print(update_workspace(course).summary())
        return 0
    if not args.files:
        raise DeltaLabError("reset needs the files to reset",
                            "name them by their path in the workspace, e.g. "
                            "python -m deltalab workspace reset notebooks/02_the_transaction_log.ipynb (make reset NB=...)")
    for name in args.files:
        backup = reset_file(course, name)
        kept = f"; yours is in {backup}" if backup is not None else ""
        print(f"{name}: the course's version again{kept}")
    return 0


def _names(text: str) -> list[str]:
    """A comma-separated class list (checked by deltalab.classroom.check_names)."""
    return [name.strip() for name in text.split(",") if name.strip()]


def _serve_classroom(args: argparse.Namespace) -> int:
    """Start the classroom's hub, say how to log in, and keep it until interrupted."""
    import time

    from deltalab.classroom import (CLASSROOM_DRIVER_MEMORY, INSTRUCTOR_PASSWORD_ENV, LOG_NAME, PASSWORD_ENV,
                                    start_classroom)
    from deltalab.session import check_driver_memory

    if args.driver_memory is not None:
        check_driver_memory(args.driver_memory, "--driver-memory", CLASSROOM_DRIVER_MEMORY)

    print(f"Starting JupyterHub for {len(args.students)} student(s) and {len(args.instructors)} instructor(s) ...")
    room = start_classroom(args.students, args.instructors, root=args.root, ip=args.ip, port=args.port,
                           idle_timeout=args.idle_timeout, driver_memory=args.driver_memory)
    print(f"Running: {room.url}/hub/login  (students: {', '.join(room.students)}; "
          f"instructors: {', '.join(room.instructors) or 'none'})")
    for who, variable, password in [("students'", PASSWORD_ENV, room.password),
                                    ("instructors'", INSTRUCTOR_PASSWORD_ENV, room.instructor_password)]:
        print(f"The {who} password: " + (f"the one you set in {variable}" if os.environ.get(variable) else password))
    print(f"The hub's state and the users' homes: {room.root} (log: {room.root / LOG_NAME}). Stop with Ctrl-C.",
          flush=True)
    try:
        while room.process is not None and room.process.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        print("Stopping every user's server, then the hub.")
        room.stop()
        return 0
    print(f"deltalab: the hub stopped on its own; see {room.root / LOG_NAME}", file=sys.stderr)
    return 1


def _serve_cluster(cores: int, memory: str, directory: Path | None) -> int:
    """Start a loopback cluster, say how to use it, and keep it until interrupted."""
    import time

    from deltalab.cluster import start_cluster
    from deltalab.locations import work_root

    folder = directory or work_root() / "_cluster"
    print(f"Starting a Spark master and a worker ({cores} cores, {memory}) on 127.0.0.1; logs in {folder} ...")
    with start_cluster(folder, cores=cores, memory=memory) as running:
        print(f"Running. In another shell: export SPARK_MASTER={running.url}  (then make lab, papermill, ...)")
        print(f"The master's status: {running.status_url}   Stop with Ctrl-C.", flush=True)
        try:
            while running.master.poll() is None and running.worker.poll() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            print("Stopping the worker and the master.")
            return 0
    print("deltalab: the master or the worker stopped on its own; see their logs in " + str(folder), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
