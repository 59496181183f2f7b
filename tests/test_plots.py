"""deltalab.plots: each figure's marks are the data it returns (no Spark: hand-made inputs)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from deltalab.errors import DeltaLabError  # noqa: E402
from deltalab.log import FileLifetime  # noqa: E402
from deltalab.plots import (CHANGE_TYPE_COLOURS, OKABE_ITO, OUTCOME_COLOURS, plot_change_feed, plot_client_outcomes, plot_file_lifetimes,  # noqa: E402
                            plot_file_ranges, plot_micro_batches, plot_schema_history, plot_skipping,
                            plot_transaction_lanes)

A = "part-00000-3f2a9c1e-0000-4000-8000-000000000001-c000.snappy.parquet"
B = "city=new%20york/part-00000-77aa9c1e-0000-4000-8000-000000000002-c000.snappy.parquet"
LIFETIMES = [FileLifetime(A, 0, 2, False, 4), FileLifetime(B, 1, None, False, 2), FileLifetime(A, 2, None, True, 4)]


def test_file_lifetimes_draw_one_bar_per_lifetime_from_add_to_remove():
    drawn = plot_file_lifetimes(LIFETIMES, title="t")
    bars = drawn.ax.patches
    assert len(bars) == len(drawn.data) == 3
    spans = [(bar.get_x(), bar.get_x() + bar.get_width()) for bar in bars]
    assert spans == [(0, 2), (1, 3), (2, 3)], "a live file runs to the right edge (latest version + 1)"
    assert [matplotlib.colors.to_hex(bar.get_facecolor()) for bar in bars] == \
        [OKABE_ITO[0].lower(), OKABE_ITO[0].lower(), OKABE_ITO[1].lower()], "the deletion vector's re-add in its colour"
    assert list(drawn.data["removed"]) == [2, None, None] and list(drawn.data["deletion_vector"]) == [False, False, True]
    assert [t.get_text() for t in drawn.ax.get_yticklabels()] == \
        ["part-00000-3f2a", "city=new york/part-00000-77aa", "part-00000-3f2a + DV"], "told apart, partition kept"
    assert drawn.ax.get_xlim() == (0, 3) and drawn.ax.get_title() == "t"
    assert [t.get_text() for t in drawn.ax.get_xticklabels()] == ["0", "1", "2"], "one column per version"
    assert [t.get_text() for t in drawn.ax.get_legend().get_texts()] == ["data file", "re-added with a deletion vector"]
    plt.close(drawn.ax.figure)
    without_dv = plot_file_lifetimes(LIFETIMES[:2])
    assert [t.get_text() for t in without_dv.ax.get_legend().get_texts()] == ["data file"]
    plt.close(without_dv.ax.figure)


@pytest.mark.parametrize("files", [2, 30])  # before: 0.07 in over the label, 1.14 in under it
def test_file_lifetimes_keep_their_legend_just_under_the_axis_label(files):
    """The legend sits under the x-axis label, not over it and not an inch below it, however many files."""
    lifetimes = [FileLifetime(f"part-{i:05d}-3f2a9c1e.snappy.parquet", i % 3, None, False, 4) for i in range(files)]
    drawn = plot_file_lifetimes(lifetimes, gone=[lifetimes[0].path])
    figure = drawn.ax.figure
    figure.canvas.draw()                                  # the axis label finds its place when drawn
    renderer = figure.canvas.get_renderer()
    label = drawn.ax.xaxis.label.get_window_extent(renderer)
    legend = drawn.ax.get_legend().get_window_extent(renderer)
    gap_inches = (label.y0 - legend.y1) / figure.dpi
    assert 0.1 < gap_inches < 0.3, f"{files} files: {gap_inches:.2f} in between the axis label and the legend"
    plt.close(figure)


def test_file_lifetimes_draw_the_files_no_longer_on_disk_and_shade_the_versions_that_need_them():
    drawn = plot_file_lifetimes(LIFETIMES, gone=[A])
    assert list(drawn.data["on_disk"]) == [False, True, False], "both lifetimes of the path: the file is gone"
    bars, shades = drawn.ax.patches[:3], drawn.ax.patches[3:]
    assert [matplotlib.colors.to_hex(bar.get_facecolor()) for bar in bars] == ["#ffffff", OKABE_ITO[0].lower(), "#ffffff"]
    assert [(shade.get_x(), shade.get_x() + shade.get_width()) for shade in shades] == [(0, 1), (1, 2), (2, 3)], \
        "every version that reads the file, once each"
    assert [t.get_text() for t in drawn.ax.get_legend().get_texts()][-2:] == ["no longer on disk", "a version that needs it"]
    plt.close(drawn.ax.figure)
    with pytest.raises(DeltaLabError, match="no lifetime names"):
        plot_file_lifetimes(LIFETIMES, gone=["part-00009.parquet"])
    wider = plot_file_lifetimes(LIFETIMES, latest=4)
    assert wider.ax.get_xlim() == (0, 5) and (wider.ax.patches[1].get_x() + wider.ax.patches[1].get_width()) == 5
    plt.close(wider.ax.figure)
    with pytest.raises(DeltaLabError, match="latest=1"):
        plot_file_lifetimes(LIFETIMES, latest=1)


def test_file_lifetimes_of_nothing_are_refused_plainly():
    with pytest.raises(DeltaLabError, match="no file lifetimes"):
        plot_file_lifetimes([])


def test_skipping_draws_each_files_range_the_value_and_what_was_read():
    import pandas as pd

    stats = pd.DataFrame({"path": ["c.parquet", "a.parquet", "b.parquet"], "min.id": [20, 0, 10], "max.id": [29, 9, 19]})
    drawn = plot_skipping(stats, "id", 12, ["b.parquet"])
    assert list(drawn.data["file"]) == ["a.parquet", "b.parquet", "c.parquet"], "sorted by min, top to bottom"
    assert list(drawn.data["read"]) == [False, True, False]
    bars = drawn.ax.patches
    assert [(bar.get_x(), bar.get_x() + bar.get_width()) for bar in bars] == [(0, 9), (10, 19), (20, 29)]
    assert [matplotlib.colors.to_hex(bar.get_facecolor()) for bar in bars] == \
        [OKABE_ITO[0].lower(), OKABE_ITO[3].lower(), OKABE_ITO[0].lower()]
    assert [line.get_xdata()[0] for line in drawn.ax.get_lines()] == [12], "the value looked up, across the files"
    assert drawn.ax.get_title() == "id = 12: 1 of 3 files read"
    plt.close(drawn.ax.figure)
    with pytest.raises(DeltaLabError, match="not files of the statistics"):
        plot_skipping(stats, "id", 12, ["z.parquet"])


def test_schema_history_colours_each_column_by_what_the_version_did_to_it():
    import pandas as pd

    history = pd.DataFrame({"version": [0, 2, 5], "columns": [{"a": "string", "n": "integer"},
                                                              {"a": "string", "n": "integer", "x": "double"},
                                                              {"a": "string", "n": "long", "x": "double"}]})
    drawn = plot_schema_history(history, title="t")
    states = drawn.data.pivot(index="column", columns="version", values="state")
    assert states.loc["a"].tolist() == ["present"] * 3
    assert states.loc["n"].tolist() == ["present", "present", "type changed"]
    assert states.loc["x"].tolist() == ["absent", "added", "present"]
    assert drawn.data.set_index(["column", "version"]).loc[("x", 0), "type"] is None
    assert len(drawn.ax.patches) == 9 and [t.get_text() for t in drawn.ax.texts].count("double") == 2
    assert [t.get_text() for t in drawn.ax.get_xticklabels()] == ["0", "2", "5"]
    plt.close(drawn.ax.figure)


def test_client_outcomes_draw_a_cell_per_table_and_client_labelled_with_the_features_refused():
    import pandas as pd

    outcomes = pd.DataFrame({"table": ["plain", "plain", "dvs", "dvs"], "client": ["read", "append", "read", "append"],
                             "outcome": ["yes", "yes", "refused", "wrong values"],
                             "features": [(), (), ("deletionVectors",), ()]})
    drawn = plot_client_outcomes(outcomes)
    assert drawn.data["label"].tolist() == ["yes", "yes", "refused:\ndeletionVectors", "wrong values"]
    assert [p.get_facecolor() for p in drawn.ax.patches] == [matplotlib.colors.to_rgba(OUTCOME_COLOURS[o])
                                                             for o in outcomes["outcome"]]
    assert [t.get_text() for t in drawn.ax.get_yticklabels()] == ["plain", "dvs"]
    assert [t.get_text() for t in drawn.ax.get_legend().get_texts()] == ["yes", "refused", "wrong values"]
    plt.close(drawn.ax.figure)
    with pytest.raises(DeltaLabError, match="does not know the outcomes"):
        plot_client_outcomes(outcomes.assign(outcome="maybe"))


def test_file_ranges_draw_one_segment_per_file_sorted_by_min_on_whole_file_ticks():
    import pandas as pd

    stats = pd.DataFrame({"min.id": [50, 0], "max.id": [99, 49]})
    ax = plot_file_ranges(stats, "id", title="t")
    (segments,) = ax.collections
    assert [tuple(map(tuple, s)) for s in segments.get_segments()] == [((0, 0), (49, 0)), ((50, 1), (99, 1))]
    assert list(ax.get_yticks()) == [0, 1], "a tick per file"
    assert list(plot_file_ranges(stats.head(1), "id").get_yticks()) == [0], "one file, one tick"
    with pytest.raises(DeltaLabError, match="min.day"):
        plot_file_ranges(stats, "day")
    plt.close("all")


def test_transaction_lanes_draw_each_attempt_from_the_version_it_read_to_the_one_it_tried():
    import pandas as pd

    attempts = pd.DataFrame({"transaction": ["A", "B", "A"], "attempt": [1, 1, 2], "read_version": [0, 0, 1],
                             "version": [1, 1, 2], "outcome": ["ConcurrentAppendException", "committed", "committed"]})
    drawn = plot_transaction_lanes(attempts)
    assert drawn.data["lane"].tolist() == [0, 1, 2] and drawn.data["committed"].tolist() == [False, True, True]
    assert [t.get_text() for t in drawn.ax.get_yticklabels()] == ["A, attempt 1", "B, attempt 1", "A, attempt 2"]
    assert [t.get_text() for t in drawn.ax.texts] == ["ConcurrentAppendException at v1", "committed v1", "committed v2"]
    lines = [line for line in drawn.ax.lines if len(line.get_xdata()) == 2]
    assert [list(line.get_xdata()) for line in lines] == [[0, 1], [0, 1], [1, 2]]
    assert [matplotlib.colors.to_hex(line.get_color()) for line in lines] == [OKABE_ITO[3].lower(), OKABE_ITO[2].lower(),
                                                                            OKABE_ITO[2].lower()]
    assert list(drawn.ax.get_xticks()) == [0, 1, 2]
    plt.close(drawn.ax.figure)
    with pytest.raises(DeltaLabError, match="a version after the one it read"):
        plot_transaction_lanes(attempts.assign(version=0))
    with pytest.raises(DeltaLabError, match="needs the columns"):
        plot_transaction_lanes(attempts.drop(columns="outcome"))


def test_micro_batches_draw_a_filled_mark_per_committed_batch_and_a_hollow_one_per_skipped_batch():
    import pandas as pd

    batches = pd.DataFrame({"run": ["first", "first", "restart"], "batch": [0, 1, 1], "version": [1, 2, 2],
                            "committed": [True, True, False]})
    drawn = plot_micro_batches(batches)
    assert drawn.data["lane"].tolist() == [0, 0, 1]
    assert [t.get_text() for t in drawn.ax.texts] == ["batch 0", "batch 1", "batch 1 skipped"]
    assert [t.get_text() for t in drawn.ax.get_yticklabels()] == ["first", "restart"]
    faces = [matplotlib.colors.to_hex(line.get_markerfacecolor()) for line in drawn.ax.lines]
    assert faces == [OKABE_ITO[2].lower(), OKABE_ITO[2].lower(), "#ffffff"]
    assert list(drawn.ax.get_xticks()) == [0, 1, 2]
    plt.close(drawn.ax.figure)
    with pytest.raises(DeltaLabError, match="needs the columns"):
        plot_micro_batches(batches.drop(columns="committed"))


def test_micro_batches_of_a_long_run_label_each_lanes_ends_and_the_skipped_batch():
    import pandas as pd

    rows = [{"run": "first", "batch": b, "version": b + 1, "committed": True} for b in range(30)]
    drawn = plot_micro_batches(pd.DataFrame(rows + [{"run": "restart", "batch": 29, "version": 30, "committed": False}]))
    assert [t.get_text() for t in drawn.ax.texts] == ["batch 0", "batch 29", "batch 29 skipped"]
    assert len(drawn.ax.get_xticks()) <= 12
    plt.close(drawn.ax.figure)


def test_change_feed_stacks_each_versions_change_rows_and_hatches_those_read_from_adds():
    import pandas as pd

    per_version = pd.DataFrame({"operation": ["CREATE TABLE", "MERGE", "MERGE"], "cdc": [0, 0, 2], "insert": [0, 3, 1],
                                "update_preimage": [0, 0, 2], "update_postimage": [0, 0, 2], "delete": [0, 0, 0]},
                               index=pd.Index([0, 1, 2], name="version"))
    drawn = plot_change_feed(per_version)
    assert drawn.data.values.tolist() == [[1, "insert", 3, False], [2, "insert", 1, True], [2, "update_preimage", 2, True],
                                          [2, "update_postimage", 2, True]]
    bars = drawn.ax.patches
    assert [b.get_height() for b in bars] == [3, 1, 2, 2] and [b.get_y() for b in bars] == [0, 0, 1, 3]
    assert [matplotlib.colors.to_hex(b.get_facecolor()) for b in bars] == [
        CHANGE_TYPE_COLOURS[t].lower() for t in ("insert", "insert", "update_preimage", "update_postimage")]
    assert [b.get_hatch() for b in bars] == ["//", None, None, None]
    assert [t.get_text() for t in drawn.ax.get_xticklabels()] == ["v0\nCREATE TABLE", "v1\nMERGE", "v2\nMERGE"]
    plt.close(drawn.ax.figure)
    with pytest.raises(DeltaLabError, match="needs the columns"):
        plot_change_feed(per_version.drop(columns="cdc"))


def test_overlapping_labels_names_tick_labels_that_run_into_each_other_and_nothing_in_a_readable_figure():
    from deltalab.plots import overlapping_labels

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.bar(range(12), range(12))
    ax.set_xticks(range(12), [f"a long label {i}" for i in range(12)])
    pairs = overlapping_labels(fig)
    assert ("a long label 0", "a long label 1") in pairs and all(a != b for a, b in pairs)
    ax.set_xticks(range(0, 12, 6), ["a long label 0", "a long label 6"])
    assert overlapping_labels(fig) == [], "two labels fit"
    ax.set_title("the title")
    ax.text(0.5, 1.0, "the title, again", transform=ax.transAxes, ha="center", va="bottom")
    assert ("the title", "the title, again") in [tuple(sorted(p, key=len)) for p in overlapping_labels(fig)], \
        "texts of any kind, not only tick labels"
    plt.close(fig)


def test_overlapping_labels_looks_at_the_ticks_in_view_only():
    """An axis keeps label objects for ticks outside its limits; they are not drawn, so they overlap nothing."""
    from deltalab.plots import overlapping_labels

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot(range(100), range(100))
    ax.set_xlim(0, 10)   # ticks of the autoscaled 0-100 axis stay behind, out of view
    assert overlapping_labels(fig) == []
    plt.close(fig)
