"""Command line: ``python -m deltalab doctor | fetch-jars | execute NOTEBOOK...``."""

from __future__ import annotations

import argparse
import sys

from deltalab.errors import DeltaLabError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deltalab", description="Tools for the Delta Lake internals course.")
    commands = parser.add_subparsers(dest="command", required=True)
    doctor = commands.add_parser("doctor", help="check Python, Java, packages, Delta jars and the work directory")
    doctor.add_argument("--smoke", action="store_true", help="also start Spark and write a tiny Delta table")
    commands.add_parser("fetch-jars", help="download Delta's jars into the cache once (needs the network)")
    execute = commands.add_parser("execute", help="run notebooks in place so that their stored outputs are fresh")
    execute.add_argument("notebooks", nargs="+")
    args = parser.parse_args(argv)
    try:
        if args.command == "doctor":
            from deltalab.doctor import main as doctor_main

            return doctor_main(smoke=args.smoke)
        if args.command == "fetch-jars":
            from deltalab.jars import fetch_jars, jar_dir

            jars = fetch_jars()
            print(f"{len(jars)} Delta jars cached in {jar_dir()}")
            return 0
        from deltalab.notebook import execute_in_place

        for notebook in args.notebooks:
            seconds = execute_in_place(notebook)
            print(f"{notebook}: executed in {seconds:.0f} s")
        return 0
    except DeltaLabError as error:
        print(f"deltalab: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
