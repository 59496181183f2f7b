"""The nbval plugin that starts a kernel again when it exits before answering (tests/support/nbval_kernel_start.py)."""
from __future__ import annotations

import pytest

import nbval.kernel
import nbval_kernel_start


def starts_that(outcomes: list[str]):
    """A stand-in for nbval's start_new_kernel: each call takes the next outcome; "died" writes a line
    to the kernel's stderr and fails as a kernel that exits at start does, "other" fails otherwise."""
    calls = []

    def start(startup_timeout=60, kernel_name="python", **kwargs):
        outcome = outcomes[len(calls)]
        calls.append(kwargs["stderr"])
        if outcome == "died":
            print("zmq.error.ZMQError: Address already in use", file=kwargs["stderr"], flush=True)
            raise RuntimeError("Kernel died before replying to kernel_info")
        if outcome == "other":
            raise RuntimeError("Kernel didn't respond in 60 seconds")
        return "manager", "client"

    return start, calls


def test_the_plugin_replaces_nbvals_function():
    assert nbval.kernel.start_new_kernel is nbval_kernel_start.start_new_kernel


def test_a_kernel_that_dies_at_start_is_started_again_and_its_stderr_printed(monkeypatch, capsys):
    start, calls = starts_that(["died", "ok"])
    monkeypatch.setattr(nbval_kernel_start, "_nbval_start_new_kernel", start)
    assert nbval_kernel_start.start_new_kernel(kernel_name="python3", stderr=None) == ("manager", "client")
    assert len(calls) == 2
    printed = capsys.readouterr().err
    assert "start 1 of 3" in printed and "Address already in use" in printed


def test_other_failures_are_raised_at_once(monkeypatch):
    start, calls = starts_that(["other", "ok"])
    monkeypatch.setattr(nbval_kernel_start, "_nbval_start_new_kernel", start)
    with pytest.raises(RuntimeError, match="didn't respond"):
        nbval_kernel_start.start_new_kernel()
    assert len(calls) == 1


def test_it_gives_up_after_three_starts(monkeypatch):
    start, calls = starts_that(["died"] * 4)
    monkeypatch.setattr(nbval_kernel_start, "_nbval_start_new_kernel", start)
    with pytest.raises(RuntimeError, match="died before replying"):
        nbval_kernel_start.start_new_kernel()
    assert len(calls) == nbval_kernel_start.STARTS == 3
