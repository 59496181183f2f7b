"""Helpers the test modules import: the repository's folder, skipping (or failing on CI) for a
missing tool, the small Delta table several files start from, and the folder of pictures tests leave
(screenshots, figures) with a check that a picture is not blank.

A uniquely named module on the suite's path (``pythonpath`` in pyproject.toml), never imported as
``conftest``: tests/conftest.py holds fixtures and hooks only."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]   # tests/support/ -> the repository
NOTEBOOK_TIMEOUT = 900   # seconds a notebook run with papermill may take


def run_with_papermill(name: str, out_dir: Path, env: dict[str, str], parameters: dict | None = None) -> None:
    """Run notebooks/``name``.ipynb with papermill (``-p`` for each of ``parameters``) into ``out_dir``;
    fail the test with the end of papermill's message if a cell raises."""
    arguments = [str(part) for key, value in (parameters or {}).items() for part in ("-p", key, value)]
    result = subprocess.run(
        [sys.executable, "-m", "papermill", str(REPO / "notebooks" / f"{name}.ipynb"), str(out_dir / f"{name}.ipynb"),
         "-k", "python3", "--cwd", str(REPO / "notebooks"), "--no-progress-bar",
         "--execution-timeout", str(NOTEBOOK_TIMEOUT), *arguments],
        capture_output=True, text=True, env=env, timeout=NOTEBOOK_TIMEOUT + 60,
    )
    where = env.get("SPARK_MASTER", "local")
    assert result.returncode == 0, f"{name} with {parameters or 'its defaults'} failed under {where}:\n{result.stderr[-4000:]}"
    from deltalab.plots import OVERLAP_WARNING

    cells = json.loads((out_dir / f"{name}.ipynb").read_text())["cells"]
    overlaps = [line for cell in cells for output in cell.get("outputs", []) if output.get("output_type") == "stream"
                for line in "".join(output.get("text", "")).splitlines() if line.startswith(OVERLAP_WARNING)]
    assert not overlaps, f"{name} with {parameters or 'its defaults'} drew a figure whose labels overlap: {overlaps}"


def in_ci() -> bool:
    """True on the course's CI, where a missing tool is a failure rather than a reason to skip."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(condition: bool, reason: str) -> None:
    """Skip the calling test when ``condition`` is false, except on CI, where it fails."""
    if not condition:
        if in_ci():
            pytest.fail(f"required on CI: {reason}")
        pytest.skip(reason)


def addr_state_table(spark, path, rows=(("CA", 1), ("NY", 2))) -> None:
    """A one-file Delta table ``(addr_state STRING, count BIGINT)`` at ``path``, two rows unless told."""
    spark.createDataFrame(list(rows), "addr_state STRING, count BIGINT").coalesce(1).write.format("delta").save(str(path))


# The committed part of labs/ (labs/README.md): what an instructor's checkout holds.
LABS_COMMITTED = ["source", "release", "nbgrader_config.py", "README.md"]


def checkout_copy(root: Path) -> Path:
    """notebooks/ and the committed part of labs/ at ``root``, as in a fresh checkout."""
    skip = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    shutil.copytree(REPO / "notebooks", root / "notebooks", ignore=skip)
    for name in LABS_COMMITTED:
        source = REPO / "labs" / name
        if source.is_dir():
            shutil.copytree(source, root / "labs" / name, ignore=skip)
        else:
            (root / "labs").mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / "labs" / name)
    return root


def artifacts() -> Path:
    """The folder tests leave their pictures in (screenshots, figures): ``$DELTALAB_ARTIFACTS``, else .artifacts/."""
    directory = Path(os.environ.get("DELTALAB_ARTIFACTS") or REPO / ".artifacts")
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def ink(png: Path) -> tuple[float, int]:
    """The share of a PNG's pixels that differ from its most common colour (the background), and the number of
    distinct colours: a blank or one-colour image has almost none of either."""
    from PIL import Image

    with Image.open(png) as image:
        rgb = image.convert("RGB")
        counts = rgb.getcolors(maxcolors=rgb.width * rgb.height)   # (count, colour) for every colour present
    background = max(count for count, _ in counts)
    return 1 - background / (rgb.width * rgb.height), len(counts)
