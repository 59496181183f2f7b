"""Pictures: matplotlib plots of the log's files over versions, for the data-skipping and Z-order
notebooks, a coloured conflict matrix.

Each function draws on the given ``ax`` (or a new figure), so notebooks can lay several out side by
side. The older ones return the Axes; the newer return :class:`Drawn`, the Axes and one row per mark
drawn, so that a notebook can assert the picture against its table. Nothing here talks to Spark: the
inputs are pandas DataFrames from :func:`deltalab.skipping.file_stats` and the effectiveness table,
NumPy arrays from :mod:`deltalab.curves`, or :class:`deltalab.log.FileLifetime` lists. Colours are
Okabe and Ito's, which colour-blind readers tell apart.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence
from urllib.parse import unquote

import numpy as np

from deltalab.errors import DeltaLabError
from deltalab.log import short_file_name

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas as pd
    from matplotlib.axes import Axes

    from deltalab.log import FileLifetime

__all__ = ["Drawn", "OUTCOME_COLOURS", "overlapping_labels", "watch_figure_labels", "plot_change_feed", "plot_client_outcomes", "plot_file_lifetimes", "plot_micro_batches", "plot_transaction_lanes", "plot_schema_history", "plot_skipping", "plot_effectiveness", "plot_file_ranges", "plot_bounding_boxes", "plot_curve", "style_conflict_matrix"]


def _axes(ax: "Axes | None", figsize: tuple[float, float]) -> "Axes":
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, new_ax = plt.subplots(figsize=figsize)
    return new_ax


def _inches_of_axes(ax: "Axes", inches: float) -> float:
    """``inches`` as a fraction of the Axes' height: a legend under the x-axis label stays the same distance
    below it whether the Axes holds three files or thirty (a fraction of the height alone leaves a gap that
    grows with the figure)."""
    return inches / max(ax.get_position().height * ax.figure.get_figheight(), 1e-6)


def _require(frame: "pd.DataFrame", columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise DeltaLabError(
            f"{what} needs the columns {missing}, which the DataFrame lacks (it has {list(frame.columns)}).",
            fix="Pass the table built by the notebook (file_stats output or the effectiveness table).",
        )


#: Okabe and Ito's palette (blue, orange, bluish green, vermillion): told apart with any colour vision.
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00")


@dataclass
class Drawn:
    """What a plot drew: its Axes, and ``data``, one row per mark, for the notebook to assert against the table."""

    ax: Any
    data: "pd.DataFrame"


def _file_label(path: str) -> str:
    """A data file's short label: the book's ``part-00000`` and the first four characters of its UUID
    (``part-00000-3f2a``), partition folders kept, so that two files of one task number differ."""
    folder, _, name = path.rpartition("/")
    match = re.match(r"(part-\d+)-([0-9a-f]{4})", name)
    label = f"{match.group(1)}-{match.group(2)}" if match else short_file_name(name)
    return f"{unquote(folder)}/{label}" if folder else label


def plot_file_lifetimes(lifetimes: Sequence["FileLifetime"], ax: "Axes | None" = None,
                        title: str | None = None, gone: Iterable[str] = (), latest: int | None = None) -> Drawn:
    """Each data file as a bar over versions, from the commit that added it to the one that removed it
    (:meth:`deltalab.log.DeltaLog.file_lifetimes`); a file still in the table runs to the right edge.
    Files re-added with a deletion vector are drawn in a second colour and hatched. Files named in ``gone``
    (the log's paths of files no longer on disk, e.g. after VACUUM) are drawn as dashed outlines, and the
    versions that need one of them are shaded: time travel to them fails. ``latest`` (the table's latest
    version) widens the axis to commits that add and remove no file (default: the last one that does).

    ``Drawn.data`` has one row per bar: ``file`` (the log's path), ``added``, ``removed`` (``None``: live),
    ``deletion_vector``, ``rows`` and ``on_disk``, in the order drawn, top to bottom.
    """
    import pandas as pd
    from matplotlib.patches import Patch

    if not lifetimes:
        raise DeltaLabError("plot_file_lifetimes got no file lifetimes: the table's log adds no file.",
                            fix="Pass read_log(path).file_lifetimes() of a table with data.")
    data = pd.DataFrame([{"file": f.path, "added": f.added, "removed": f.removed,
                          "deletion_vector": f.deletion_vector, "rows": f.rows} for f in lifetimes])
    data["removed"] = data["removed"].astype(object).where(data["removed"].notna(), None)
    gone = set(gone)
    unknown = sorted(gone - set(data["file"]))
    if unknown:
        raise DeltaLabError(f"plot_file_lifetimes got files in `gone` that no lifetime names: {unknown[:3]}.",
                            fix="Pass the log's paths (FileLifetime.path) of the files no longer on disk.")
    data["on_disk"] = [path not in gone for path in data["file"]]
    last = int(max(data["added"].max(), data["removed"].dropna().max() if data["removed"].notna().any() else 0))
    if latest is not None:
        if latest < last:
            raise DeltaLabError(f"plot_file_lifetimes got latest={latest}, but a file is added or removed at version {last}.",
                                fix="Pass the table's latest version (deltalab.latest_version(path)), or leave it out.")
        last = latest
    ax = _axes(ax, (7, 0.35 * len(data) + 1.4))
    unreadable: set[int] = set()
    for y, row in data.iterrows():
        end = last + 1 if row["removed"] is None else row["removed"]
        colour = OKABE_ITO[1] if row["deletion_vector"] else OKABE_ITO[0]
        if row["on_disk"]:
            ax.barh(y, end - row["added"], left=row["added"], height=0.6, color=colour,
                    hatch="//" if row["deletion_vector"] else None, edgecolor="black", linewidth=0.5)
        else:
            ax.barh(y, end - row["added"], left=row["added"], height=0.6, facecolor="white",
                    edgecolor=OKABE_ITO[3], linestyle="--", linewidth=1.2)
            unreadable.update(range(int(row["added"]), int(end)))
    for version in sorted(unreadable):
        ax.axvspan(version, version + 1, color=OKABE_ITO[3], alpha=0.15, zorder=0, linewidth=0)
    ax.set_yticks(range(len(data)), [_file_label(f) + (" + DV" if dv else "")
                                      for f, dv in zip(data["file"], data["deletion_vector"])], fontsize="small")
    ax.invert_yaxis()
    # Version v is the column [v, v + 1): a bar covers the versions whose readers read the file.
    ax.set_xticks([v + 0.5 for v in range(last + 1)], [str(v) for v in range(last + 1)])
    ax.set_xticks(range(last + 2), minor=True)
    ax.tick_params(axis="x", which="major", length=0)
    ax.grid(axis="x", which="minor", linewidth=0.4, alpha=0.6)
    ax.set_xlim(0, last + 1)
    ax.set_xlabel("table version (a file's bar covers the versions that read it)")
    ax.set_title(title or "data files over versions", fontsize="medium")
    handles = [Patch(color=OKABE_ITO[0], label="data file")]
    if data["deletion_vector"].any():
        handles.append(Patch(facecolor=OKABE_ITO[1], hatch="//", edgecolor="black", label="re-added with a deletion vector"))
    if not data["on_disk"].all():
        handles += [Patch(facecolor="white", edgecolor=OKABE_ITO[3], linestyle="--", label="no longer on disk"),
                    Patch(color=OKABE_ITO[3], alpha=0.15, label="a version that needs it")]
    ax.legend(handles=handles, fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -_inches_of_axes(ax, 0.55)),
              ncols=min(len(handles), 3), frameon=False)
    return Drawn(ax, data)


def plot_skipping(stats: "pd.DataFrame", column: str, value: Any, read: Iterable[str], ax: "Axes | None" = None,
                  title: str | None = None) -> Drawn:
    """Each file's [min, max] of ``column`` (from :func:`deltalab.skipping.file_stats`) as a horizontal bar,
    the looked-up ``value`` as a vertical line across them, and the files a scan really ``read`` (paths as
    in ``stats``, e.g. ``scan_metrics(...).input_files``) in one colour, the skipped ones in another.

    ``Drawn.data`` has one row per bar, top to bottom: ``file``, ``min``, ``max`` and ``read``.
    """
    from matplotlib.patches import Patch

    lo, hi = f"min.{column}", f"max.{column}"
    _require(stats, ["path", lo, hi], "plot_skipping")
    read = set(read)
    unknown = read - set(stats["path"])
    if unknown:
        raise DeltaLabError(f"plot_skipping: the files read {sorted(unknown)[:3]} are not files of the statistics.",
                            fix="Pass the scan's input_files and the file_stats of the same table and version.")
    data = (stats[["path", lo, hi]].rename(columns={"path": "file", lo: "min", hi: "max"})
            .sort_values(["min", "max"], kind="stable").reset_index(drop=True))
    data["read"] = data["file"].isin(read)
    ax = _axes(ax, (6, 0.3 * len(data) + 1.4))
    for y, row in data.iterrows():
        ax.barh(y, float(row["max"]) - float(row["min"]), left=float(row["min"]), height=0.6,
                color=OKABE_ITO[3] if row["read"] else OKABE_ITO[0], edgecolor="black", linewidth=0.5)
    ax.axvline(float(value), color="black", linestyle="--", linewidth=1)
    ax.set_yticks(range(len(data)), [_file_label(f) for f in data["file"]], fontsize="small")
    ax.invert_yaxis()
    ax.set_xlabel(f"{column}: each file's [min, max] from its add action's stats; dashed: {column} = {value}")
    ax.set_title(title or f"{column} = {value}: {int(data['read'].sum())} of {len(data)} files read", fontsize="medium")
    ax.legend(handles=[Patch(color=OKABE_ITO[3], label="read"), Patch(color=OKABE_ITO[0], label="skipped")],
              fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2, frameon=False)
    return Drawn(ax, data)


#: What a cell of :func:`plot_schema_history` shows, and its colour (light, so that the type written on it reads).
SCHEMA_STATES = {"absent": "#FFFFFF", "present": "#CFE8F6", "added": "#009E73", "type changed": "#E69F00"}


def plot_schema_history(history: "pd.DataFrame", ax: "Axes | None" = None, title: str | None = None) -> Drawn:
    """The schema across the versions that changed it (:func:`deltalab.schema.schema_history`): one row per
    column ever in the table, one column per ``metaData`` commit, each cell the column's type at that version,
    coloured by whether the column is added there, changed type there, unchanged or absent.

    ``Drawn.data`` has one row per cell: ``column``, ``version``, ``type`` (``None``: absent) and ``state``.
    """
    import pandas as pd
    from matplotlib.patches import Patch, Rectangle

    _require(history, ["version", "columns"], "plot_schema_history")
    names = list(dict.fromkeys(name for columns in history["columns"] for name in columns))
    cells, previous = [], None
    for version, columns in zip(history["version"], history["columns"]):
        for name in names:
            kind = columns.get(name)
            if kind is None:
                state = "absent"
            elif previous is None or previous.get(name) == kind:
                state = "present"
            else:
                state = "added" if name not in previous else "type changed"
            cells.append({"column": name, "version": int(version), "type": kind, "state": state})
        previous = columns
    data = pd.DataFrame(cells, columns=["column", "version", "type", "state"])
    ax = _axes(ax, (1.6 * len(history) + 1.5, 0.45 * len(names) + 1.4))
    versions = [int(v) for v in history["version"]]
    for cell in data.itertuples():
        x, y = versions.index(cell.version), names.index(cell.column)
        ax.add_patch(Rectangle((x, y), 1, 1, facecolor=SCHEMA_STATES[cell.state], edgecolor="#999999", linewidth=0.5))
        if cell.type is not None:
            ax.text(x + 0.5, y + 0.5, cell.type, ha="center", va="center", fontsize="small")
    ax.set_xlim(0, len(versions))
    ax.set_ylim(len(names), 0)
    ax.set_xticks([i + 0.5 for i in range(len(versions))], [str(v) for v in versions])
    ax.set_yticks([i + 0.5 for i in range(len(names))], names)
    ax.tick_params(length=0)
    ax.set_xlabel("table version (the commits with a metaData action)")
    ax.set_title(title or "schema over versions", fontsize="medium")
    ax.legend(handles=[Patch(facecolor=colour, edgecolor="#999999", label=state) for state, colour in SCHEMA_STATES.items()
                       if state != "absent"], fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.2),
              ncols=3, frameon=False)
    return Drawn(ax, data)


#: The colour of each client's outcome on a table (:func:`deltalab.clients.client_outcomes`).
OUTCOME_COLOURS = {"yes": "#009E73", "refused": "#E69F00", "wrong values": "#D55E00", "other": "#BBBBBB"}


def plot_client_outcomes(outcomes: "pd.DataFrame", ax: "Axes | None" = None, title: str | None = None) -> Drawn:
    """Tables by clients (:func:`deltalab.clients.client_outcomes`): one cell per table and client, coloured by
    what the client did (:data:`OUTCOME_COLOURS`), a refusal labelled with the protocol features it names.

    ``Drawn.data`` is ``outcomes`` with each cell's ``label`` (the text drawn in it).
    """
    from matplotlib.patches import Patch, Rectangle

    _require(outcomes, ["table", "client", "outcome", "features"], "plot_client_outcomes")
    unknown = sorted(set(outcomes["outcome"]) - set(OUTCOME_COLOURS))
    if unknown:
        raise DeltaLabError(f"plot_client_outcomes does not know the outcomes {unknown}.",
                            fix=f"Pass what deltalab.clients.client_outcomes returned: outcomes are {list(OUTCOME_COLOURS)}.")
    tables = list(dict.fromkeys(outcomes["table"]))
    clients = list(dict.fromkeys(outcomes["client"]))
    data = outcomes.copy()
    data["label"] = [("refused:\n" + "\n".join(features) if features else "refused") if outcome == "refused" else outcome
                     for outcome, features in zip(data["outcome"], data["features"])]
    ax = _axes(ax, (2.1 * len(clients) + 2.2, 0.55 * len(tables) + 1.6))
    for cell in data.itertuples():
        x, y = clients.index(cell.client), tables.index(cell.table)
        ax.add_patch(Rectangle((x, y), 1, 1, facecolor=OUTCOME_COLOURS[cell.outcome], edgecolor="white", linewidth=1.5))
        ax.text(x + 0.5, y + 0.5, cell.label, ha="center", va="center", fontsize="x-small",
                color="white" if cell.outcome in ("yes", "wrong values") else "black")
    ax.set_xlim(0, len(clients))
    ax.set_ylim(len(tables), 0)
    ax.set_xticks([i + 0.5 for i in range(len(clients))], clients)
    ax.xaxis.tick_top()
    ax.set_yticks([i + 0.5 for i in range(len(tables))], tables)
    ax.tick_params(length=0)
    ax.set_title(title or "what each client does with each table", fontsize="medium", pad=22)  # above the top ticks
    ax.legend(handles=[Patch(facecolor=colour, label=outcome) for outcome, colour in OUTCOME_COLOURS.items()
                       if outcome in set(data["outcome"])],
              fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.02), ncols=4, frameon=False)
    return Drawn(ax, data)


def plot_transaction_lanes(attempts: "pd.DataFrame", ax: "Axes | None" = None, title: str | None = None) -> Drawn:
    """Transactions as lanes over the table's versions: one lane per attempt (``transaction`` and ``attempt``),
    a line from the version it read (a circle) to the version it tried to commit, ending in a filled square
    when it committed there (bluish green) or a cross with the conflict class that refused it (vermillion).

    ``attempts`` has one row per attempt: ``transaction``, ``attempt``, ``read_version``, ``version`` and
    ``outcome`` (``"committed"`` or the class name). ``Drawn.data`` is ``attempts`` in lane order with each
    row's ``lane`` (its y position) and ``committed``.
    """
    _require(attempts, ["transaction", "attempt", "read_version", "version", "outcome"], "plot_transaction_lanes")
    if attempts.empty:
        raise DeltaLabError("plot_transaction_lanes got no attempts.", fix="Pass one row per attempt of each transaction.")
    bad = attempts[attempts["version"] <= attempts["read_version"]]
    if not bad.empty:
        raise DeltaLabError(f"an attempt must try a version after the one it read: {bad.to_dict('records')}.",
                            fix="version is the commit the attempt tried to write, read_version + 1 or later.")
    data = attempts.reset_index(drop=True).copy()
    data["lane"] = range(len(data))
    data["committed"] = data["outcome"] == "committed"
    green, vermillion = OKABE_ITO[2], OKABE_ITO[3]
    ax = _axes(ax, (7.5, 0.6 * len(data) + 1.4))
    for row in data.itertuples():
        colour = green if row.committed else vermillion
        ax.plot([row.read_version, row.version], [row.lane, row.lane], color=colour, linewidth=2.5, zorder=1)
        ax.plot(row.read_version, row.lane, "o", color=colour, markerfacecolor="white", markersize=9, zorder=2)
        ax.plot(row.version, row.lane, "s" if row.committed else "X", color=colour, markersize=11, zorder=2)
        said = f"committed v{row.version}" if row.committed else f"{row.outcome} at v{row.version}"
        ax.annotate(said, (row.version, row.lane), xytext=(10, 0), textcoords="offset points", va="center",
                    fontsize="small", color=colour)
    versions = range(int(data["read_version"].min()), int(data["version"].max()) + 1)
    ax.set_xticks(list(versions))
    ax.set_xlim(min(versions) - 0.4, max(versions) + 1.6)   # room for the labels right of the last version
    ax.set_ylim(len(data) - 0.4, -0.6)
    ax.set_yticks(list(data["lane"]), [f"{row.transaction}, attempt {row.attempt}" for row in data.itertuples()])
    ax.set_xlabel("table version (circle: the snapshot read; square: committed; cross: refused)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(title or "each attempt: the version it read and the version it tried to commit", fontsize="medium")
    return Drawn(ax, data)


def plot_micro_batches(batches: "pd.DataFrame", ax: "Axes | None" = None, title: str | None = None) -> Drawn:
    """Streaming runs as lanes over the sink table's versions: each micro-batch a mark at the version whose ``txn``
    holds it, filled (bluish green) when the run committed that version, hollow (orange) when the run found the
    batch already in the table and skipped it.

    ``batches`` has one row per batch: ``run`` (the lane), ``batch`` (its id) ``version`` (the table version whose
    ``txn`` has that batch) and ``committed``. ``Drawn.data`` is ``batches`` with each row's ``lane`` and ``label``
    (empty when left out: past version 12 only each lane's first and last batch and the skipped ones are labelled).
    """
    _require(batches, ["run", "batch", "version", "committed"], "plot_micro_batches")
    if batches.empty:
        raise DeltaLabError("plot_micro_batches got no batches.", fix="Pass one row per micro-batch of each run.")
    data = batches.reset_index(drop=True).copy()
    runs = list(dict.fromkeys(data["run"]))
    data["lane"] = [runs.index(run) for run in data["run"]]
    data["label"] = [f"batch {row.batch}" if row.committed else f"batch {row.batch} skipped" for row in data.itertuples()]
    if data["version"].max() > 12:   # too many to label side by side: each lane's first and last, and every skipped one
        ends = data.groupby("lane")["batch"].agg(["min", "max"])
        keep = [not row.committed or row.batch in (ends.loc[row.lane, "min"], ends.loc[row.lane, "max"])
                for row in data.itertuples()]
        data["label"] = [label if kept else "" for label, kept in zip(data["label"], keep)]
    green, orange = OKABE_ITO[2], OKABE_ITO[1]
    ax = _axes(ax, (8, 0.7 * len(runs) + 1.5))
    for row in data.itertuples():
        colour = green if row.committed else orange
        ax.plot(row.version, row.lane, "o", color=colour, markersize=12, markeredgewidth=2,
                markerfacecolor=colour if row.committed else "white")
        if row.label:
            ax.annotate(row.label, (row.version, row.lane), xytext=(0, 11), textcoords="offset points", ha="center",
                        fontsize="small", color=colour)
    versions = range(0, int(data["version"].max()) + 1)
    if len(versions) <= 20:
        ax.set_xticks(list(versions))
    else:
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(-0.5, max(versions) + 0.5)
    ax.set_ylim(len(runs) - 0.5, -0.8)
    ax.set_yticks(range(len(runs)), runs)
    ax.set_xlabel("table version whose txn holds the batch (filled: committed by this run; hollow: skipped)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(title or "micro-batches and the table versions that hold them", fontsize="medium")
    return Drawn(ax, data)


#: The change feed's row types, in the order they are stacked, with their Okabe-Ito colours.
CHANGE_TYPE_COLOURS = {"insert": OKABE_ITO[2], "update_preimage": OKABE_ITO[1], "update_postimage": OKABE_ITO[0],
                       "delete": OKABE_ITO[3]}


def plot_change_feed(per_version: "pd.DataFrame", ax: "Axes | None" = None, title: str | None = None) -> Drawn:
    """A table's change feed per version: one stacked bar per commit, its change rows by ``_change_type``
    (:data:`CHANGE_TYPE_COLOURS`), hatched when the commit wrote no ``cdc`` files and the reader derived its rows
    from the commit's ``add`` and ``remove`` actions; a commit with no change rows is an empty slot.

    ``per_version`` has one row per version (``version`` as a column or the index): ``operation``, ``cdc`` (the
    number of ``cdc`` actions) and a count per change type. ``Drawn.data`` has one row per version and change type
    drawn: ``version``, ``change_type``, ``rows`` and ``from_cdc_files``.
    """
    import pandas as pd
    from matplotlib.patches import Patch

    frame = per_version.reset_index() if "version" not in per_version.columns else per_version.reset_index(drop=True)
    _require(frame, ["version", "operation", "cdc", *CHANGE_TYPE_COLOURS], "plot_change_feed")
    drawn = []
    ax = _axes(ax, (max(6.0, 1.1 * len(frame) + 2), 4))
    for position, row in enumerate(frame.itertuples(index=False)):
        bottom = 0
        from_cdc = int(row.cdc) > 0
        for change_type, colour in CHANGE_TYPE_COLOURS.items():
            count = int(getattr(row, change_type))
            if count:
                ax.bar(position, count, bottom=bottom, color=colour, edgecolor="white" if from_cdc else "black",
                       hatch=None if from_cdc else "//", width=0.7)
                drawn.append({"version": int(row.version), "change_type": change_type, "rows": count, "from_cdc_files": from_cdc})
                bottom += count
    ax.set_xticks(range(len(frame)), [f"v{row.version}\n{row.operation}" for row in frame.itertuples(index=False)],
                  fontsize="small")
    ax.set_ylabel("change rows")
    ax.yaxis.get_major_locator().set_params(integer=True)
    handles = [Patch(facecolor=colour, label=change_type) for change_type, colour in CHANGE_TYPE_COLOURS.items()]
    handles.append(Patch(facecolor="white", edgecolor="black", hatch="//", label="no cdc files: read from add actions"))
    ax.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    ax.set_title(title or "change rows per version, by change type", fontsize="medium")
    return Drawn(ax, pd.DataFrame(drawn, columns=["version", "change_type", "rows", "from_cdc_files"]))


def plot_effectiveness(
    table: "pd.DataFrame",
    value: str = "files_skipped",
    bound: float | None = None,
    ax: "Axes | None" = None,
) -> "Axes":
    """Grouped bars: one group per layout, one bar per column, height = fraction skipped.

    ``table`` has columns ``layout``, ``column`` and ``value``; an optional dashed line marks
    ``bound`` (e.g. the perfect-tiling bound 1 - N**(-1/k)).
    """
    _require(table, ["layout", "column", value], "plot_effectiveness")
    ax = _axes(ax, (9, 4))
    layouts = list(dict.fromkeys(table["layout"]))
    columns = list(dict.fromkeys(table["column"]))
    width = 0.8 / len(columns)
    positions = np.arange(len(layouts))
    for i, column in enumerate(columns):
        heights = [
            float(table[(table["layout"] == layout) & (table["column"] == column)][value].mean()) for layout in layouts
        ]
        ax.bar(positions + (i - (len(columns) - 1) / 2) * width, heights, width, label=column)
    if bound is not None:
        ax.axhline(bound, color="black", linestyle="--", linewidth=1, label=f"bound {bound:.2f}")
    ax.set_xticks(positions, layouts)
    ax.set_ylim(0, 1.22)  # headroom above 1.0 so the legend's single row never covers a bar
    ax.set_yticks(np.linspace(0, 1, 6))
    ax.set_ylabel(value.replace("_", " "))
    entries = len(columns) + (1 if bound is not None else 0)
    ax.legend(fontsize="small", ncols=entries, loc="upper left", frameon=False)
    return ax


def plot_file_ranges(stats: "pd.DataFrame", column: str, ax: "Axes | None" = None, title: str | None = None) -> "Axes":
    """Each file's [min, max] of ``column`` as a horizontal segment, files sorted by their min.

    Narrow, disjoint segments mean a lookup on ``column`` opens few files; segments spanning the
    whole axis mean every lookup opens that file.
    """
    lo, hi = f"min.{column}", f"max.{column}"
    _require(stats, [lo, hi], "plot_file_ranges")
    ax = _axes(ax, (4, 4))
    ordered = stats.sort_values([lo, hi], kind="stable").reset_index(drop=True)
    ax.hlines(np.arange(len(ordered)), ordered[lo].astype(float), ordered[hi].astype(float), linewidth=1.2)
    from matplotlib.ticker import MaxNLocator

    # Files are counted: a tick per file for a few, whole numbers for many, never a tick at file 0.5.
    if len(ordered) <= 10:
        ax.set_yticks(range(len(ordered)))
    else:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(-0.5, max(len(ordered), 1) - 0.5)
    ax.set_xlabel(column)
    ax.set_ylabel("file (sorted by min)")
    ax.set_title(title or column, fontsize="medium")
    return ax


def plot_bounding_boxes(
    stats: "pd.DataFrame", x: str, y: str, ax: "Axes | None" = None, title: str | None = None
) -> "Axes":
    """Each file's bounding box [min x, max x] x [min y, max y] as a rectangle in the plane.

    A good two-column layout tiles the plane with small boxes; a one-column sort gives thin
    strips; random data gives boxes that all cover the whole plane.
    """
    _require(stats, [f"min.{x}", f"max.{x}", f"min.{y}", f"max.{y}"], "plot_bounding_boxes")
    from matplotlib.patches import Rectangle

    ax = _axes(ax, (4, 4))
    for _, row in stats.iterrows():
        x0, x1 = float(row[f"min.{x}"]), float(row[f"max.{x}"])
        y0, y1 = float(row[f"min.{y}"]), float(row[f"max.{y}"])
        ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, linewidth=0.6, alpha=0.8))
    ax.set_xlim(float(stats[f"min.{x}"].min()), float(stats[f"max.{x}"].max()))
    ax.set_ylim(float(stats[f"min.{y}"].min()), float(stats[f"max.{y}"].max()))
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title or f"file boxes on ({x}, {y})", fontsize="medium")
    return ax


def plot_curve(points: np.ndarray, ax: "Axes | None" = None, title: str | None = None, labels: bool = True) -> "Axes":
    """Draw a 2-D curve given its cells in order (``deltalab.curves.curve_order(kind, bits)``)."""
    points = np.asarray(points)
    if points.ndim != 2 or points.shape[1] != 2:
        raise DeltaLabError(
            f"plot_curve draws 2-D curves; it got points of shape {points.shape}.",
            fix="Pass curve_order(kind, bits, dims=2).",
        )
    ax = _axes(ax, (4, 4))
    ax.plot(points[:, 0], points[:, 1], marker="o", markersize=3, linewidth=1)
    if labels and len(points) <= 64:
        for i, (px, py) in enumerate(points):
            ax.annotate(str(i), (px, py), textcoords="offset points", xytext=(2, 2), fontsize=6)
    side = int(points.max()) + 1
    ax.set_xticks(range(side))
    ax.set_yticks(range(side))
    ax.set_aspect("equal")
    ax.set_title(title or "", fontsize="medium")
    return ax


def style_conflict_matrix(frame: "pd.DataFrame") -> "pd.io.formats.style.Styler":
    """Colour a conflict matrix (``deltalab.concurrency.conflict_matrix``): green for ``none``,
    one shade per conflict class."""
    palette = {
        "none": "#d9f2d9",
        "ConcurrentAppendException": "#ffd9b3",
        "ConcurrentDeleteReadException": "#ffb3b3",
        "ConcurrentDeleteDeleteException": "#e6b3ff",
        "MetadataChangedException": "#b3d1ff",
        "ProtocolChangedException": "#cccccc",
    }
    return frame.style.map(lambda v: f"background-color: {palette.get(v, '#ffffff')}")


# ------------------------------------------------------------------------------- labels a reader can read


def _drawn_texts(fig: Any) -> list[Any]:
    """The non-empty texts ``fig`` draws: titles, axis labels, the tick labels of the ticks in view (an axis
    keeps label objects for ticks out of view, which are not drawn), legends, annotations, the suptitle."""
    texts = [*fig.texts, *([fig._suptitle] if getattr(fig, "_suptitle", None) is not None else [])]
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        texts += [ax.title, ax._left_title, ax._right_title, *ax.texts]
        for axis in (ax.xaxis, ax.yaxis):
            texts.append(axis.label)
            for tick in axis._update_ticks():   # matplotlib's own list of the ticks it draws
                texts += [tick.label1, tick.label2]
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            texts += [legend.get_title(), *legend.get_texts()]
    for legend in fig.legends:
        texts += [legend.get_title(), *legend.get_texts()]
    return [t for t in texts if t.get_visible() and t.get_text().strip()]


def overlapping_labels(fig: Any, renderer: Any = None) -> list[tuple[str, str]]:
    """The pairs of texts of ``fig`` that overlap once drawn (by more than a pixel each way), as their strings.

    Tick labels that run into each other, a legend over an axis label, a title over another subplot's ticks:
    a figure whose labels overlap cannot be read, at some parameter value if not at the defaults.
    ``renderer`` is the one a draw used (a ``draw_event``'s); without it the figure is drawn on its canvas."""
    if renderer is None:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
    texts = _drawn_texts(fig)
    boxes = [t.get_window_extent(renderer) for t in texts]
    pairs = []
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            a, b = boxes[i], boxes[j]
            width = min(a.x1, b.x1) - max(a.x0, b.x0)
            height = min(a.y1, b.y1) - max(a.y0, b.y0)
            if width > 1 and height > 1:
                pairs.append((texts[i].get_text(), texts[j].get_text()))
    return pairs


#: The line printed under a figure whose labels overlap (tests look for it in a notebook's outputs).
OVERLAP_WARNING = "deltalab: labels overlap in this figure"


def _report_overlaps(event: Any) -> None:
    fig = event.canvas.figure
    pairs = overlapping_labels(fig, event.renderer)
    shown = sorted(set(pairs))
    if shown and shown != getattr(fig, "_deltalab_reported", None):
        fig._deltalab_reported = shown   # a figure printed with bbox_inches="tight" is drawn twice: said once
        listed = "; ".join(f"{a!r} and {b!r}" for a, b in shown[:5])
        more = f" (and {len(shown) - 5} more)" if len(shown) > 5 else ""
        print(f"{OVERLAP_WARNING}: {listed}{more}. A wider figure, fewer ticks or shorter labels fix it.")


def _watch_open_figures() -> None:
    if "matplotlib.pyplot" not in sys.modules:   # no figure yet: matplotlib is not even imported
        return
    from matplotlib._pylab_helpers import Gcf   # pyplot's figures, without making one of them the current one

    for manager in Gcf.get_all_fig_managers():
        fig = manager.canvas.figure
        if not getattr(fig, "_deltalab_watched", False):
            fig._deltalab_watched = True
            fig.canvas.mpl_connect("draw_event", _report_overlaps)


def watch_figure_labels() -> bool:
    """In an IPython kernel, check every figure a cell leaves open when it is drawn for the notebook, and print
    :data:`OVERLAP_WARNING` with the texts that overlap; False (nothing done) outside IPython.

    The course's kernels call it at start (``exec_lines`` of the venv's ``ipython_kernel_config.json``), so
    that every figure of every notebook is checked wherever it runs: nbval fails on the extra line, and the
    notebooks at other sizes (tests/test_sizes.py) look for it. It runs before matplotlib's inline backend
    draws the cell's figures (the first of IPython's ``post_execute`` callbacks) and only connects to them:
    the check uses the draw the notebook's picture already costs."""
    try:
        from IPython import get_ipython
    except ImportError:   # pragma: no cover - IPython is in every course environment
        return False
    shell = get_ipython()
    if shell is None:
        return False
    callbacks = shell.events.callbacks["post_execute"]
    if _watch_open_figures not in callbacks:
        callbacks.insert(0, _watch_open_figures)
    return True
