"""``python -m deltalab bench``: where the course's time goes, measured side by side in one run.

Two parts, both printed as tables:

1. **Cold start.** Fresh Python processes, alternating, each timing its own phases: importing
   PySpark, starting the JVM and the session, and the first write of ten rows. One kind is plain
   Spark writing Parquet (the same quiet settings, no Delta), the other the course's
   ``get_spark()`` writing Delta. The ratio of the medians is the cost of Delta at start-up.
2. **Notebooks.** Each notebook executed top to bottom in a fresh kernel at its default
   parameters (a temporary work root), as ``python -m deltalab execute`` runs it
   (``deltalab.notebook.run_notebook``), with the time of every cell; the total and the slowest
   cells are printed, so a slow notebook says where it is slow.

Seconds depend on the machine and on what else runs on it: compare figures of one run, and
say what the machine was doing (the load average is printed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from deltalab.class_archive import ARCHIVE_OFF_ENV
from deltalab.notebook import run_notebook

# The child process of one cold-start measurement. It prints one JSON line of phase times.
_COLD_START = r"""
import json, os, sys, tempfile, time
started = time.perf_counter()
kind, out = sys.argv[1], sys.argv[2]
import pyspark
from pyspark.sql import SparkSession
imported = time.perf_counter()
if kind.startswith("delta"):
    from deltalab.session import get_spark
    spark = get_spark("bench_delta")
else:
    from deltalab.locations import work_root
    from deltalab.session import default_conf
    conf = default_conf([], work_root())
    for key in ("spark.driver.extraClassPath", "spark.sql.extensions", "spark.sql.catalog.spark_catalog"):
        conf.pop(key)
    builder = SparkSession.builder.master("local[*]").appName("bench_plain")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
session = time.perf_counter()
fmt = "delta" if kind.startswith("delta") else "parquet"
spark.range(10).write.format(fmt).save(out)
written = time.perf_counter()
spark.range(10).write.format(fmt).mode("append").save(out)
second = time.perf_counter()
print(json.dumps({"import": imported - started, "session": session - imported,
                  "first write": written - session, "second write": second - written,
                  "to first write": written - started}))
spark.stop()
"""


def _load() -> str:
    try:
        return " ".join(f"{value:.1f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


def cold_start(repeat: int = 3) -> "Any":
    """Median phase times of plain Spark (Parquet), the course's Delta session, and the same without
    the JVM class archive (``deltalab.class_archive``), alternating runs."""
    import pandas as pd

    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="deltalab-bench-") as scratch:
        env = dict(os.environ, DELTALAB_WORKDIR=str(Path(scratch) / "work"))
        for index in range(repeat):
            kinds = ("plain", "delta", "delta, no archive")
            for kind in kinds if index % 2 == 0 else reversed(kinds):
                out = str(Path(scratch) / f"{kind.replace(', ', '-').replace(' ', '_')}-{index}")
                wall = time.perf_counter()
                kind_env = dict(env, **({ARCHIVE_OFF_ENV: "off"} if kind == "delta, no archive" else {}))
                done = subprocess.run([sys.executable, "-c", _COLD_START, kind, out], capture_output=True,
                                      text=True, env=kind_env, timeout=900)
                if done.returncode != 0:
                    raise RuntimeError(f"the {kind} cold start failed:\n{done.stderr[-2000:]}")
                phases = json.loads(done.stdout.strip().splitlines()[-1])
                phases["process"] = time.perf_counter() - wall
                runs.append({"kind": kind, "run": index, **phases})
    frame = pd.DataFrame(runs)
    medians = frame.groupby("kind").median(numeric_only=True).drop(columns="run").T
    medians["delta / plain"] = medians["delta"] / medians["plain"]
    medians["no archive / plain"] = medians["delta, no archive"] / medians["plain"]
    return medians[["plain", "delta", "delta, no archive", "delta / plain", "no archive / plain"]]


def notebook_times(paths: list[Path], top: int = 3) -> "Any":
    """Execute each notebook in a fresh kernel; return one row per notebook with its slowest cells."""
    import pandas as pd

    rows = []
    for path in paths:
        notebook, total = run_notebook(path, record_timing=True)
        cells = []
        for index, cell in enumerate(notebook.cells):
            timing = cell.get("metadata", {}).get("execution", {})
            if cell.cell_type != "code" or "shell.execute_reply" not in timing:
                continue
            seconds = _seconds(timing["iopub.execute_input"], timing["shell.execute_reply"])
            first = next((line for line in cell.source.splitlines() if line.strip() and not line.startswith("#")), "")
            cells.append((seconds, index, first[:60]))
        cells.sort(reverse=True)
        rows.append({"notebook": path.name, "seconds": round(total, 1),
                     **{f"cell {rank + 1}": f"[{i}] {s:.1f} s {text}" for rank, (s, i, text) in enumerate(cells[:top])}})
    return pd.DataFrame(rows)


def _seconds(start: str, end: str) -> float:
    from datetime import datetime

    return (datetime.fromisoformat(end.replace("Z", "+00:00")) - datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()


def main(repeat: int, notebooks: list[str], skip_notebooks: bool) -> int:
    """Print the cold-start table and, unless skipped, the per-notebook table."""
    import pandas as pd

    pd.set_option("display.width", 250)
    pd.set_option("display.max_colwidth", 80)
    print(f"load average before: {_load()}")
    print(f"\nCold start, median of {repeat} alternating runs (seconds):")
    print(cold_start(repeat).round(2).to_string())
    if not skip_notebooks:
        from deltalab.locations import repo_root

        repo = repo_root()
        paths = [Path(p) for p in notebooks] or sorted((repo or Path(".")).glob("notebooks/*.ipynb"))
        print("\nNotebooks at their default parameters (seconds, fresh kernel each):")
        print(notebook_times(paths).to_string(index=False))
    print(f"\nload average after: {_load()}")
    return 0
