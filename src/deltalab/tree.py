"""Directory trees with sizes, the way the course shows what Delta wrote."""

from __future__ import annotations

from pathlib import Path


def human_size(size: int) -> str:
    """A byte count as ``478 B``, ``1.6 KiB`` or ``3.2 MiB``."""
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def tree_lines(path: str | Path, hide_crc: bool = False, hide_hidden: bool = False) -> list[str]:
    """The lines of ``show_tree``: the directory's name, then each entry sorted by name.

    ``hide_crc`` leaves out checksum files (Hadoop's ``.*.crc`` beside each data file and
    Delta's ``N.crc`` beside each commit). ``hide_hidden`` leaves out names starting with ``.``.
    """
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a directory")
    lines = [f"{root.name}/"]

    def keep(entry: Path) -> bool:
        if hide_crc and entry.name.endswith(".crc"):
            return False
        return not (hide_hidden and entry.name.startswith("."))

    def walk(directory: Path, prefix: str) -> None:
        entries = sorted((entry for entry in directory.iterdir() if keep(entry)), key=lambda entry: entry.name)
        for index, entry in enumerate(entries):
            last = index == len(entries) - 1
            branch = "└── " if last else "├── "
            if entry.is_dir():
                lines.append(f"{prefix}{branch}{entry.name}/")
                walk(entry, prefix + ("    " if last else "│   "))
            else:
                lines.append(f"{prefix}{branch}{entry.name}  ({human_size(entry.stat().st_size)})")

    walk(root, "")
    return lines


def show_tree(path: str | Path, hide_crc: bool = False, hide_hidden: bool = False) -> None:
    """Print a directory as a tree with file sizes; names are relative, so outputs are portable."""
    print("\n".join(tree_lines(path, hide_crc=hide_crc, hide_hidden=hide_hidden)))
