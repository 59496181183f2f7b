"""deltalab.holds: the one hold, with no Spark and no second process (tests/test_drivers.py, test_concurrency.py
and test_objectstore.py hold real drivers, Spark tasks and server requests with it)."""

from __future__ import annotations

import threading

import pytest

from deltalab.errors import DeltaLabError
from deltalab.holds import STOP_MARKER, Hold, cancel_reached, hold_gate, hold_here


def test_holds_pass_once_and_cancel(tmp_path) -> None:
    hold = Hold(tmp_path / "h")
    hold.release()
    hold_here(hold.path)                            # released in advance: goes straight on
    assert hold.reached
    hold_here(hold.path)                            # a second call passes without waiting
    cancelled = Hold(tmp_path / "c")
    cancelled.cancel()
    with pytest.raises(RuntimeError, match="cancelled"):
        hold_here(cancelled.path)
    hold.cancel()                                   # once cancelled, the calls that passed raise too
    with pytest.raises(RuntimeError, match="^the held operation stopped here$"):
        hold_gate(hold.path, cancelled_message="the held operation stopped here")()


def test_a_stop_file_in_the_folder_cancels_every_hold_of_it(tmp_path) -> None:
    first, second = Hold(tmp_path / "first"), Hold(tmp_path / "second")
    (tmp_path / STOP_MARKER).touch()
    for hold in (first, second):
        with pytest.raises(RuntimeError, match="cancelled"):
            hold_here(hold.path)


def test_a_thread_waits_at_its_hold_until_released(tmp_path) -> None:
    hold = Hold(tmp_path / "h")
    passed = threading.Event()
    thread = threading.Thread(target=lambda: (hold_here(hold.path), passed.set()), daemon=True)
    thread.start()
    hold.wait_reached(timeout=60)
    assert hold.reached and not passed.wait(0.2), "stopped at the hold"
    hold.release()
    assert passed.wait(60), "released: it goes on"


def test_a_hold_never_reached_times_out_with_a_clear_message(tmp_path) -> None:
    with pytest.raises(DeltaLabError, match="a process stops at the hold never"):
        Hold(tmp_path / "never").wait_reached(timeout=0.1)


def test_cancel_reached_cancels_the_holds_a_process_stopped_at(tmp_path) -> None:
    reached, waiting = Hold(tmp_path / "reached"), Hold(tmp_path / "not-yet")
    errors = []

    def stop_at(hold: Hold) -> None:
        try:
            hold_here(hold.path)
        except RuntimeError as error:
            errors.append(str(error))

    thread = threading.Thread(target=stop_at, args=(reached,), daemon=True)
    thread.start()
    reached.wait_reached(timeout=60)
    assert cancel_reached(tmp_path) == [reached.path]
    thread.join(60)
    assert errors == ["the hold reached was cancelled"] and not waiting.reached
