"""What a student or an instructor does in their JupyterLab behind the hub, done over its REST API
and kernel websocket (tests/test_classroom.py): log in with the class password, read a notebook of
their workspace, run its code cells in a kernel of their server, run a command there (nbgrader's);
and the peak memory of their servers while that runs."""
from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import Future
from typing import Any

import requests
import websocket

from deltalab.classroom import LOG_NAME, START_TIMEOUT, Classroom
from deltalab.errors import DeltaLabError
from deltalab.processes import wait_until

CELL_TIMEOUT = 600   # seconds a cell may run (three students' Spark drivers share two cores)


def start_server(room: Classroom, name: str, timeout: float = START_TIMEOUT) -> str:
    """Start ``name``'s JupyterLab through the hub's API (if it is not running), as the student's first
    visit would, and wait until the hub says it is ready; its URL."""
    def ready() -> bool:
        server = room.api("GET", f"users/{name}").get("servers", {}).get("")
        if server is None:   # the hub dropped it: the start failed
            raise DeltaLabError(f"{name}'s JupyterLab did not start", f"see why in the hub's log, {room.root / LOG_NAME}")
        return bool(server.get("ready"))

    if not room.api("GET", f"users/{name}").get("servers", {}).get("", {}).get("ready"):
        room.api("POST", f"users/{name}/server")
    wait_until(ready, timeout, f"{name}'s JupyterLab to start", interval=0.5)
    return f"{room.url}/user/{name}/"


def user_token(room: Classroom, name: str, note: str = "deltalab classroom tests") -> str:
    """A new API token of ``name``'s (what a student's scripts would use), made with the hub's service token."""
    return str(room.api("POST", f"users/{name}/tokens", note=note, expires_in=24 * 3600)["token"])


def log_in(hub_url: str, name: str, password: str) -> requests.Response:
    """Post the hub's login form as a browser does (with the _xsrf cookie the form page sets); the
    answer, not followed: 302 to the user's server on success."""
    session = requests.Session()
    session.get(f"{hub_url}/hub/login", timeout=30)
    return session.post(f"{hub_url}/hub/login", timeout=30, allow_redirects=False,
                        data={"username": name, "password": password, "_xsrf": session.cookies.get("_xsrf", "")})


def server_get(server_url: str, token: str, path: str) -> requests.Response:
    """GET ``<server>/api/<path>`` with a user's token."""
    return requests.get(f"{server_url}api/{path}", headers={"Authorization": f"token {token}"}, timeout=60)


def put_notebook(server_url: str, token: str, path: str, notebook: dict[str, Any]) -> None:
    """Save ``notebook`` at ``path`` of the user's server, as JupyterLab does when they save."""
    response = requests.put(f"{server_url}api/contents/{path}", headers={"Authorization": f"token {token}"},
                            json={"type": "notebook", "format": "json", "content": notebook}, timeout=60)
    response.raise_for_status()


def _message(session: str, code: str) -> dict[str, Any]:
    return {
        "header": {"msg_id": uuid.uuid4().hex, "username": "student", "session": session,
                   "msg_type": "execute_request", "version": "5.3"},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                    "allow_stdin": False, "stop_on_error": True},
    }


def _run_cell(ws: websocket.WebSocket, session: str, code: str, printed: list[str] | None = None) -> str | None:
    """Execute ``code``; None when it ran clean, else the error's name and value. What it prints to
    stdout is appended to ``printed``."""
    request = _message(session, code)
    ws.send(json.dumps(request))
    error, replied, idle = None, False, False
    while not (replied and idle):
        message = json.loads(ws.recv())
        if message.get("parent_header", {}).get("msg_id") != request["header"]["msg_id"]:
            continue
        kind = message["header"]["msg_type"]
        if kind == "stream" and message["content"]["name"] == "stdout" and printed is not None:
            printed.append(message["content"]["text"])
        elif kind == "error":
            error = f"{message['content']['ename']}: {message['content']['evalue']}"
        elif kind == "execute_reply":
            replied = True
            if message["content"]["status"] != "ok":
                error = error or f"{message['content'].get('ename')}: {message['content'].get('evalue')}"
        elif kind == "status" and message["content"]["execution_state"] == "idle":
            idle = True
    return error


def run_notebook(server_url: str, token: str, path: str) -> list[str]:
    """Run the code cells of the notebook at ``path`` (in the user's workspace) in a new kernel of the
    user's server, top to bottom, stopping at the first error; the errors (empty: it ran clean)."""
    response = server_get(server_url, token, f"contents/{path}")
    response.raise_for_status()
    cells = [c for c in response.json()["content"]["cells"] if c["cell_type"] == "code"]
    sources = [c["source"] if isinstance(c["source"], str) else "".join(c["source"]) for c in cells]
    errors, _ = run_cells(server_url, token, sources, path, directory=path.rpartition("/")[0])
    return errors


def run_command(server_url: str, token: str, command: list[str], cwd: str = ".") -> str:
    """Run ``command`` in a kernel of the user's server, as that user would in a terminal there (their
    environment, in ``cwd``, relative to the folder their server serves); its output. Fails the test, with the
    output, if the command fails."""
    code = ("import subprocess, sys\n"
            f"done = subprocess.run({command!r}, cwd={cwd!r}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)\n"
            "print(done.stdout)\n"
            "assert done.returncode == 0, f'exit status {done.returncode}'\n")
    errors, printed = run_cells(server_url, token, [code], " ".join(command), directory="")
    assert not errors, f"{errors[0]}; it printed:\n{printed[-3000:]}"
    return printed


def run_cells(server_url: str, token: str, sources: list[str], what: str, directory: str) -> tuple[list[str], str]:
    """Run ``sources`` as cells in a new kernel of the user's server started in ``directory`` (relative
    to the folder it serves, as JupyterLab starts a notebook's kernel in the notebook's folder),
    stopping at the first error; the errors (empty: they ran clean) and what they printed."""
    headers = {"Authorization": f"token {token}"}
    kernel = requests.post(f"{server_url}api/kernels", json={"name": "python3", "path": directory},
                           headers=headers, timeout=60)
    kernel.raise_for_status()
    kernel_id = kernel.json()["id"]
    session = uuid.uuid4().hex
    ws_url = server_url.replace("http://", "ws://") + f"api/kernels/{kernel_id}/channels?session_id={session}"
    printed: list[str] = []
    ws = None
    try:
        ws = websocket.create_connection(ws_url, header=[f"Authorization: token {token}"], timeout=CELL_TIMEOUT)
        for number, source in enumerate(sources):
            error = _run_cell(ws, session, source, printed)
            if error:
                return [f"{what}, code cell {number}: {error}"], "".join(printed)
        return [], "".join(printed)
    finally:
        if ws is not None:
            ws.close()
        # Also when the websocket was refused: a kernel left starting would outlive the test.
        requests.delete(f"{server_url}api/kernels/{kernel_id}", headers=headers, timeout=60)


def peak_memory(pids: dict[str, int], runs: list[Future]) -> dict[str, Any]:
    """The peak (by proportional memory) of each named process tree, sampled every half second
    until every one of ``runs`` is done: ``{name: TreeMemory}``."""
    from process_testing import TreeMemory, tree_memory

    peaks = {name: TreeMemory(0, 0, 0) for name in pids}
    while not all(run.done() for run in runs):
        for name, pid in pids.items():
            peaks[name] = max(peaks[name], tree_memory(pid), key=lambda memory: memory.proportional)
        time.sleep(0.5)
    return peaks
