"""Which notebook outputs nbval compares but the machine's load can change (issue 56; a report, not a test).

nbval compares each code cell's stored outputs with a fresh run's, as text, after the replacements
of tests/nbval_sanitize.cfg. An output that depends on timing, load, ports or the order of
concurrent events passes on a quiet machine and fails on a busy one. This script runs every
notebook (or those named) twice, once on a quiet machine and once with every core kept busy by
other processes, two notebooks at a time as ``make test`` runs them, and reports each compared cell
whose text differs between the stored outputs, the quiet run and the loaded run, with the lines that
differ. Cells nbval does not compare (tagged ``nbval-ignore-output``) are left out.

    .venv/bin/python tests/support/output_stability.py                       # every notebook
    .venv/bin/python tests/support/output_stability.py notebooks/11_object_stores.ipynb --runs 2
    .venv/bin/python tests/support/output_stability.py --busy -- make test   # a command, every core kept busy beside it

Exit status 1 when a compared output differed. Run it with nothing else on the machine: the quiet
run must be quiet. ``make test-stability`` runs it over every notebook.
"""

from __future__ import annotations

import argparse
import configparser
import difflib
import multiprocessing
import os
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SANITIZE = REPO / "tests" / "nbval_sanitize.cfg"
# What nbval leaves out of its comparison (nbval.plugin.IPyNbFile.skip_compare without --nbdime).
SKIPPED = {"metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
           "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg"}


def sanitizers() -> list[tuple[re.Pattern, str]]:
    parser = configparser.ConfigParser()
    parser.read(SANITIZE)
    return [(re.compile(parser[section]["regex"]), parser[section]["replace"]) for section in parser.sections()]


def compared(outputs, patterns) -> dict[str, list[str]]:
    """A cell's outputs as nbval compares them: by key (stream names merged, MIME types flattened), sanitized."""
    import copy

    from nbformat import from_dict
    from nbval.plugin import coalesce_streams, transform_streams_for_comparison

    def clean(value) -> str:
        text = value if isinstance(value, str) else "".join(value) if isinstance(value, list) else repr(value)
        for pattern, replacement in patterns:
            text = pattern.sub(replacement, text)
        return text

    keyed: dict[str, list[str]] = {}
    nodes = [from_dict(copy.deepcopy(dict(output))) for output in outputs]
    for output in transform_streams_for_comparison(coalesce_streams(nodes)):
        for key, value in output.items():
            if key in SKIPPED:
                continue
            if key == "data":
                for mime, data in value.items():
                    if mime not in SKIPPED:
                        keyed.setdefault(mime, []).append(clean(data))
            else:
                keyed.setdefault(key, []).append(clean(value))
    return keyed


def compared_by_nbval(cell) -> bool:
    """Whether nbval compares this code cell's outputs: not tagged nbval-ignore-output (or marked so by a
    ``# NBVAL_IGNORE_OUTPUT`` comment), not skipped; nbval's own reading of tags and markers."""
    from nbval.plugin import find_comment_markers, find_metadata_tags

    options = dict(find_comment_markers(cell.source))
    options.update(dict(find_metadata_tags(cell.metadata)))
    return options.get("check", True) and not options.get("skip", False)


def run_one(path: str) -> tuple[str, list | None, float, str]:
    """Execute one notebook in a fresh kernel (deltalab.notebook.run_notebook); its code cells' outputs."""
    from deltalab.notebook import run_notebook

    started = time.monotonic()
    try:
        notebook, _ = run_notebook(path)
    except Exception as error:  # noqa: BLE001 - reported, the other notebooks go on
        return path, None, time.monotonic() - started, str(error).splitlines()[-1] if str(error) else repr(error)
    return path, [cell.get("outputs", []) for cell in notebook.cells], time.monotonic() - started, ""


def burn(stop) -> None:
    while not stop.is_set():
        for _ in range(100_000):
            pass


def run_busy(command: list[str], load: int) -> int:
    """Run ``command`` with ``load`` busy processes beside it for its whole run; its exit status."""
    import subprocess

    if not command:
        raise SystemExit("--busy needs a command: --busy -- make test")
    stop = multiprocessing.Event()
    burners = [multiprocessing.Process(target=burn, args=(stop,), daemon=True) for _ in range(load)]
    for process in burners:
        process.start()
    started = time.monotonic()
    try:
        status = subprocess.call(command)
    finally:
        stop.set()
        for process in burners:
            process.join(5)
    print(f"output_stability: {' '.join(command)} exited {status} after {time.monotonic() - started:.0f} s "
          f"with {load} busy processes beside it")
    return status


def run_all(paths: list[str], workers: int, load: int) -> dict[str, tuple[list | None, float, str]]:
    stop = multiprocessing.Event()
    burners = [multiprocessing.Process(target=burn, args=(stop,), daemon=True) for _ in range(load)]
    for process in burners:
        process.start()
    try:
        with ProcessPoolExecutor(workers) as pool:
            results = {}
            for path, outputs, seconds, error in pool.map(run_one, paths):
                results[path] = (outputs, seconds, error)
                print(f"  {Path(path).name}: {seconds:.0f} s{' FAILED: ' + error if error else ''}", flush=True)
            return results
    finally:
        stop.set()
        for process in burners:
            process.join(5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="default: every notebooks/*.ipynb")
    parser.add_argument("--workers", type=int, default=2, help="notebooks at a time (default 2, as make test)")
    parser.add_argument("--load", type=int, default=os.cpu_count() or 2,
                        help="busy processes beside the loaded run (default: one per core)")
    parser.add_argument("--runs", type=int, default=1, help="quiet and loaded runs each (default 1)")
    parser.add_argument("--busy", action="store_true",
                        help="instead: run the command after -- with --load busy processes beside it; its exit status")
    argv = sys.argv[1:] if argv is None else argv
    command = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if args.busy:
        return run_busy(command, args.load)
    import nbformat

    paths = [str(Path(p).resolve()) for p in args.notebooks] or [str(p) for p in sorted((REPO / "notebooks").glob("*.ipynb"))]
    patterns = sanitizers()
    runs: list[tuple[str, dict]] = []
    for index in range(args.runs):
        for label, load in (("quiet", 0), ("loaded", args.load)):
            print(f"run {label} #{index + 1}: {len(paths)} notebooks, {args.workers} at a time, {load} busy processes beside")
            runs.append((f"{label} #{index + 1}", run_all(paths, args.workers, load)))
    unstable = 0
    for path in paths:
        stored = nbformat.read(path, as_version=4)
        for index, cell in enumerate(stored.cells):
            if cell.cell_type != "code" or not compared_by_nbval(cell):
                continue
            versions = [("stored", compared(cell.get("outputs", []), patterns))]
            for label, results in runs:
                outputs = results[path][0]
                if outputs is not None:
                    versions.append((label, compared(outputs[index], patterns)))
            if all(version == versions[0][1] for _, version in versions[1:]):
                continue
            unstable += 1
            print(f"\n{Path(path).name} cell {index}: {' / '.join(label for label, _ in versions)} differ")
            reference = versions[0][1]
            for label, version in versions[1:]:
                if version != reference:
                    lines = difflib.unified_diff(_text(reference).splitlines(), _text(version).splitlines(),
                                                 "stored", label, lineterm="", n=0)
                    print("\n".join(f"    {line}" for line in lines))
    failed = [(label, path) for label, results in runs for path, (outputs, _, _) in results.items() if outputs is None]
    for label, path in failed:
        print(f"{Path(path).name} failed in the {label} run: {runs[[l for l, _ in runs].index(label)][1][path][2]}")
    print(f"\n{unstable} compared cells differ; {len(failed)} runs failed")
    return 1 if unstable or failed else 0


def _text(keyed: dict[str, list[str]]) -> str:
    return "\n".join(f"[{key}]\n" + "\n".join(values) for key, values in sorted(keyed.items()))


if __name__ == "__main__":
    sys.exit(main())
