"""Calling the learner's function under watch (deltalab.labs.student), with messages in the lab format
(deltalab.labs.report): an unfinished stub is told it is not written yet, an error raised in the JVM
becomes one line, side effects of the learner's code are refused, a failure names the table and seed it
happened on, and the course functions and Spark jobs an answer used are recorded.

A lab's own check serves as the vehicle; the messages come from these modules, so every lab's checks
say the same. The message format itself is asserted by ``lab_testing.assert_plain_failure``
(tests/support/lab_testing.py), for every check in the suite.
"""

from __future__ import annotations

import json
import sys

import pytest

from deltalab import temporary_conf
from deltalab.labs.lab01_parquet import check_footer_row_count
from deltalab.labs.lab08_zorder import check_interleave_bits
from deltalab.labs.report import CheckFailed
from deltalab.labs.student import Watched, call_student, calls_watched, is_stub, spark_jobs_started
from lab_testing import assert_plain_failure


def test_unfinished_function_is_told_to_replace_the_stub():
    def stub(values, bits):
        raise NotImplementedError()

    with pytest.raises(CheckFailed) as caught:
        check_interleave_bits(stub)
    assert "not written yet" in assert_plain_failure(caught.value)


def test_a_stub_is_told_before_the_check_builds_anything(monkeypatch):
    """Every check is an ``exercise_check``: nbgrader's stub is recognised from its bytecode and told at once
    (lab 12's checks would otherwise build their tables, seconds to a minute, before calling it)."""
    from deltalab.labs import lab12_engines

    def features_needed(protocol, to):
        """The released stub, docstring and comment included."""
        # YOUR CODE HERE
        raise NotImplementedError()

    def partly_written(protocol, to):
        if protocol:
            return set()
        raise NotImplementedError()

    def without_parentheses(protocol, to):
        raise NotImplementedError

    assert is_stub(features_needed) and is_stub(without_parentheses)
    assert not any(is_stub(f) for f in (partly_written, lambda protocol, to: set(), print, len, "features_needed"))
    monkeypatch.setattr(lab12_engines, "engine_tables", lambda *args: pytest.fail("the check built its tables"))
    monkeypatch.setattr(lab12_engines, "lab_spark", lambda: pytest.fail("the check asked for a session"))
    for check in (lab12_engines.check_features_needed, lab12_engines.check_delta_rs_can,
                  lab12_engines.check_read_with_delta_rs):
        with pytest.raises(CheckFailed) as caught:
            check(features_needed)
        name = check.__name__.removeprefix("check_")
        assert f"{name} is not written yet" in assert_plain_failure(caught.value), caught.value


def test_every_check_of_every_lab_tells_a_stub_at_once():
    import importlib
    import pkgutil

    import deltalab.labs

    checks = []
    for module in pkgutil.iter_modules(deltalab.labs.__path__):
        if module.name.startswith("lab"):
            lab = importlib.import_module(f"deltalab.labs.{module.name}")
            checks += [getattr(lab, name) for name in dir(lab) if name.startswith("check_")
                       and getattr(getattr(lab, name), "__module__", None) == lab.__name__]
    assert len(checks) >= 30
    undecorated = [f"{c.__module__}.{c.__name__}" for c in checks if not hasattr(c, "__wrapped__")]
    assert not undecorated, f"decorate these with @exercise_check (deltalab.labs.student): {undecorated}"


def test_a_jvm_error_in_student_code_becomes_one_line(spark):
    def queries_a_missing_table(path):
        return spark.read.format("delta").load(path + "_nowhere").count()

    # Lab 01's check: the lightest tables of any lab (a few Parquet files) before the answer is called.
    with pytest.raises(CheckFailed) as caught:
        check_footer_row_count(queries_a_missing_table)
    message = assert_plain_failure(caught.value)
    assert "raised AnalysisException" in message and len(message.splitlines()) == 2


# ----------------------------------------------------------------------------- side effects


def _plain(action) -> str:
    with pytest.raises(CheckFailed) as caught:
        action()
    return assert_plain_failure(caught.value)


def test_an_argument_changed_in_place_is_refused():
    def empties(values):
        values.clear()
        return 0

    message = _plain(lambda: call_student("c", empties, "empties", [1, 2, 3], hint="h"))
    assert "changed its argument [1, 2, 3] in place" in message, message


def test_a_session_setting_left_behind_is_refused_and_one_put_back_is_not(spark):
    key = "spark.databricks.delta.schema.autoMerge.enabled"

    def leaves_it_on():
        spark.conf.set(key, "true")

    def puts_it_back():
        with temporary_conf(spark, {key: "true"}):
            return spark.conf.get(key)

    try:
        message = _plain(lambda: call_student("c", leaves_it_on, "leaves_it_on", hint="h"))
        assert f"left the session setting {key} changed (before the call it was unset)" in message, message
    finally:
        spark.conf.unset(key)
    assert call_student("c", puts_it_back, "puts_it_back", hint="h") == "true"


def test_a_change_in_a_read_only_folder_is_refused(tmp_path):
    (tmp_path / "table").mkdir()
    (tmp_path / "table" / "part-0.parquet").write_text("data")
    (tmp_path / "elsewhere").mkdir()
    assert call_student("c", lambda p: (tmp_path / "elsewhere" / "x").write_text("y"), "writes_elsewhere",
                        str(tmp_path / "table"), hint="h", read_only=[tmp_path / "table"]) > 0
    message = _plain(lambda: call_student("c", lambda p: (tmp_path / "table" / "part-0.parquet").unlink(),
                                          "deletes", str(tmp_path / "table"), hint="h", read_only=[tmp_path / "table"]))
    assert "changed the folder table (1 file(s) written, deleted or rewritten, e.g. part-0.parquet)" in message


# ----------------------------------------------------------------------------- generated tables


# -- how an answer was computed ----------------------------------------------------------------

def _helper(values: list[int]) -> int:
    return sum(values)


def test_a_failure_says_which_table_and_seed_it_happened_on():
    def raises(values):
        raise ValueError("bad value")

    def empties(values):
        values.clear()

    with pytest.raises(CheckFailed) as raised:
        call_student("c", raises, "raises", [1], hint="look here", seed=9, on="a generated table")
    with pytest.raises(CheckFailed) as changed:
        call_student("c", empties, "empties", [1, 2], hint="", seed=3, on="the example table")
    assert "on a generated table, raises(" in str(raised.value) and "ValueError: bad value" in str(raised.value)
    assert raised.value.seed == 9 and "(tables of seed 9)" in str(raised.value).splitlines()[0]
    assert "on the example table, empties changed its argument" in str(changed.value) and changed.value.seed == 3


def test_calls_watched_names_the_functions_and_modules_called_and_keeps_a_profiler_running():
    events = []
    previous = lambda frame, event, arg: events.append(event)  # noqa: E731 - a profiler already set
    sys.setprofile(previous)
    try:
        with calls_watched([_helper], modules=["json"]) as called:
            _helper([1, 2])
            _helper([3])
            json.dumps({"a": 1})
        assert sys.getprofile() is previous, "the profiler that was set is put back"
    finally:
        sys.setprofile(None)
    assert called == [f"{_helper.__module__}._helper", "json.dumps"], called
    assert "call" in events, "the profiler set before kept receiving calls"


def test_watched_counts_the_spark_jobs_and_the_helpers_of_every_call(spark):
    counted = Watched(lambda n: spark.range(n).count(), helpers=[_helper])
    assert counted(5) == 5 and counted(3) == 3
    assert counted.jobs >= 2 and counted.helpers_called == []
    helped = Watched(lambda values: _helper(values) * 2, helpers=[_helper])
    assert helped([1, 2]) == 6 and helped.jobs == 0 and helped.helpers_called == [f"{_helper.__module__}._helper"]
    before = spark_jobs_started()
    spark.range(4).collect()
    assert spark_jobs_started() > before
