"""The classroom's idle culler (``deltalab.classroom``): on a hub of its own with the shortest
timeout, a server nobody uses is stopped and a student at work keeps theirs.

Marked ``classroom`` like tests/test_classroom.py and run with it (``make test-classroom``, CI in
the course image), in a module of its own so that a second pytest worker runs its minutes of waiting
beside the class's hub tests.
"""

from __future__ import annotations

import secrets
import time

import pytest

from classroom_testing import server_get, start_server, user_token
from deltalab.classroom import activity_interval, home_of, start_classroom
from deltalab.processes import is_running, process_tree, wait_until


def test_activity_is_reported_often_enough_for_the_idle_timeout():
    """The hub hears of a server's activity, and the culler checks, a quarter of the timeout apart
    (JupyterHub's 5 minutes for the default hour): a student at work is never taken for idle."""
    assert activity_interval(3600) == 300 and activity_interval(7200) == 300
    assert activity_interval(600) == 150 and activity_interval(60) == 15


@pytest.mark.classroom
def test_the_idle_culler_stops_an_idle_students_server_and_keeps_their_files(tmp_path):
    """A hub of its own with the shortest timeout (60 s): a server nobody uses is stopped by the
    culler within a timeout and a check, its processes end, and the student's workspace stays;
    the server of a student at work (a request every second) is still running past the timeout."""
    room = start_classroom(["dee", "eve"], root=tmp_path / "room", password=secrets.token_urlsafe(9), idle_timeout=60)
    try:
        eve = (start_server(room, "eve"), user_token(room, "eve"))
        start_server(room, "dee")
        server = process_tree(room.api("GET", "users/dee")["servers"][""]["state"]["pid"])
        assert server, "dee's server is not running"
        started = time.monotonic()

        def eve_works() -> None:
            server_get(*eve, "contents/notebooks").raise_for_status()   # eve at work: a request every second

        def dee_stopped_while_eve_works() -> bool:
            eve_works()
            return not room.api("GET", "users/dee")["servers"]

        wait_until(dee_stopped_while_eve_works, 60 + 2 * activity_interval(60) + 30,
                   "the idle culler to stop dee's server", interval=1)
        print(f"dee's idle server stopped by the culler {time.monotonic() - started:.0f} s after it started")
        assert not [p for p in server if is_running(p)], "the server's processes still run"
        assert (home_of(room.root, "dee") / "course" / "notebooks" / "00_hello_delta.ipynb").is_file()
        # eve keeps working past the timeout plus two of the culler's checks: her server must still run
        while time.monotonic() - started < 60 + 2 * activity_interval(60) + 5:
            eve_works()
            time.sleep(1)
        assert room.api("GET", "users/eve")["servers"], "the culler stopped eve's server while she was working"
    finally:
        room.stop()
