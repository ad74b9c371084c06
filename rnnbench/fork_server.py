"""A fork server: one process that imports torch and a module once and forks children from it.

A fresh Python spends 2-3 s of CPU importing torch before it runs anything, as much as a fast
implementation's quick conformance checks; a child forked from a process that has imported it
starts at once. `ForkServer(modules).start(payload, env, cwd, events_fd, output_fd)` returns a
`Forked` child that runs `child_process.child_main` as a fresh one would, in a session (and so a
process group) of its own, with stdin from /dev/null, stdout and stderr on `output_fd`, the
environment `env` and the working directory `cwd`.

The server is a child of this process in a session of its own, reached over a Unix socket: a
request is one message carrying three descriptors (the child's event and output pipes, and a
status pipe). On the status pipe the child itself writes "ready PID" once it leads its own
session, so that a kill of its process group can never miss it, and the server writes
"exit CODE" (negative: the signal) once the child has exited and its group has been killed; the
server reaps it. Lost, when the server died first: the pipe then ends without a status.

What the server read at import time comes from the environment it started with, so a request
whose environment differs from it in any variable but Inductor's (`PER_CHILD_PREFIXES`) is
refused (`start` returns None) and the caller starts a fresh process; as is every request once
the server has failed. Only Linux-like systems with fork and descriptor passing have a server.
"""
from __future__ import annotations

import atexit
import importlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback

# Variables a child's environment may set apart from the server's: Inductor's, which it reads
# when used, and neither `import torch` nor the conformance child imports Inductor (a test says
# so). The parent sets one of them itself once it has compiled.
PER_CHILD_PREFIXES = ("TORCHINDUCTOR_", "_TORCHINDUCTOR_")
READY_TIMEOUT_S = 120.0     # the server's imports come first, on a machine that may be busy
MESSAGE_BYTES = 1 << 20
LAUNCHER = ("import sys; cwd = sys.path.pop(0); import rnnbench.fork_server as server; "
            "sys.path.append(cwd); sys.exit(server.serve(int(sys.argv[1]), sys.argv[2:]))")


def available() -> bool:
    """Whether this platform can run a fork server."""
    return hasattr(os, "fork") and hasattr(socket, "send_fds") and hasattr(socket, "AF_UNIX")


class Forked:
    """A child the server forked: `pid` and `wait()` as `subprocess.Popen` has them, `ended()`,
    and `lost` once the server died before saying how the child ended (`returncode` is None)."""

    def __init__(self, status_fd: int, pid: int):
        self.status_fd, self.pid = status_fd, pid
        self.returncode: int | None = None
        self.lost = False
        self.buffer = b""

    def ended(self) -> bool:
        """Whether the child has ended, or the server that would say so has."""
        self._read(0)
        return self.returncode is not None or self.lost

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code, waiting up to `timeout` seconds; None when lost or still running."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.ended():
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            self._read(remaining)
        return self.returncode

    def _read(self, timeout: float | None) -> None:
        if self.status_fd < 0:
            return
        with selectors.DefaultSelector() as selector:
            selector.register(self.status_fd, selectors.EVENT_READ)
            if not selector.select(timeout):
                return
        chunk = os.read(self.status_fd, 4096)
        self.buffer += chunk
        for line in self.buffer.split(b"\n"):
            if line.startswith(b"exit "):
                self.returncode = int(line.split()[1])
        if not chunk or self.returncode is not None:
            os.close(self.status_fd)
            self.status_fd = -1
            self.lost = self.returncode is None


class ForkServer:
    """The parent's side: the server process and the socket to it (see the module)."""

    def __init__(self, modules: list[str]):
        self.env = dict(os.environ)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", LAUNCHER, str(theirs.fileno()), *modules],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.socket = ours
        self.lock = threading.Lock()
        self.failed = False

    def start(self, payload: dict, env: dict, cwd: str, events_fd: int, output_fd: int
              ) -> Forked | None:
        """A forked child running `child_main` on `payload`; None when this server cannot start
        it as a fresh process would (another environment, or the server failed)."""
        if self.failed or _differs(env, self.env):
            return None
        status_read, status_write = os.pipe()
        request = json.dumps({"payload": payload, "env": env, "cwd": cwd}).encode()
        try:
            with self.lock:
                socket.send_fds(self.socket, [request], [events_fd, output_fd, status_write])
        except OSError:
            self.failed = True
        finally:
            os.close(status_write)
        forked = Forked(status_read, 0) if not self.failed else None
        if forked is None:
            os.close(status_read)
            return None
        ready = _ready_pid(forked, READY_TIMEOUT_S)
        if ready is None:   # no fork: a dead or stuck server, or fork failed there
            self.failed = True
            if forked.status_fd >= 0:
                os.close(forked.status_fd)
            return None
        forked.pid = ready
        return forked

    def close(self) -> None:
        """End the server: it kills what still runs of its children and exits."""
        self.socket.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _differs(env: dict, started: dict) -> bool:
    keys = {key for key in set(env) | set(started) if not key.startswith(PER_CHILD_PREFIXES)}
    return any(env.get(key) != started.get(key) for key in keys)


def _ready_pid(forked: Forked, timeout: float) -> int | None:
    """The PID from the child's "ready" line, within `timeout` seconds; None without one."""
    deadline = time.monotonic() + timeout
    while b"\n" not in forked.buffer and forked.status_fd >= 0:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        forked._read(remaining)
    line = forked.buffer.split(b"\n", 1)[0]
    if not line.startswith(b"ready "):
        return None
    return int(line.split()[1])


_servers: dict[tuple[str, ...], ForkServer] = {}
_servers_lock = threading.Lock()


def shared_server(modules: list[str]) -> ForkServer | None:
    """This process's server with `modules` imported, started on first use and ended at exit;
    None where the platform has none."""
    if not available():
        return None
    key = tuple(modules)
    with _servers_lock:
        if key not in _servers:
            _servers[key] = ForkServer(modules)
            if len(_servers) == 1:
                atexit.register(_close_all)
        return _servers[key]


def _close_all() -> None:
    for server in _servers.values():
        server.close()
    _servers.clear()


# --- the server's side ---------------------------------------------------------------------

def serve(socket_fd: int, modules: list[str]) -> int:
    """Import `modules`, then fork a child per request until the socket closes; exit 3 without
    serving when an import left a Python thread running (a fork keeps only the forking thread;
    the BLAS thread pool NumPy starts at import handles a fork itself)."""
    for module in modules:
        importlib.import_module(module)
    if threading.active_count() > 1:
        return 3
    requests = socket.socket(fileno=socket_fd)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    statuses: dict[int, int] = {}
    with selectors.DefaultSelector() as selector:
        selector.register(requests, selectors.EVENT_READ)
        selector.register(wake_read, selectors.EVENT_READ)
        while True:
            for key, _ in selector.select():
                if key.fd == wake_read:
                    os.read(wake_read, 4096)
                    continue
                message, fds, _, _ = socket.recv_fds(requests, MESSAGE_BYTES, 3)
                if not message:
                    _end_children(statuses)
                    return 0
                server_fds = [requests.fileno(), selector.fileno(), wake_read, wake_write,
                              *statuses.values()]
                pid = _fork(json.loads(message), fds, server_fds)
                if pid is not None:
                    statuses[pid] = fds[2]
            _reap(statuses)


def _fork(request: dict, fds: list[int], server_fds: list[int]) -> int | None:
    """Fork the child of one request; the PID, or None (and the status pipe closed) on failure."""
    events_fd, output_fd, status_fd = fds
    try:
        pid = os.fork()
    except OSError:
        os.close(status_fd)
        pid = None
    if pid == 0:
        _child(request, events_fd, output_fd, status_fd, server_fds)  # never returns
    os.close(events_fd)
    os.close(output_fd)
    return pid


def _child(request: dict, events_fd: int, output_fd: int, status_fd: int,
           server_fds: list[int]) -> None:
    """The forked child: what `subprocess.Popen` and `child_process.LAUNCHER` give a fresh one,
    then `child_main`; it leaves by `os._exit` so that nothing of the server's loop runs on."""
    code = 1
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in server_fds:
            os.close(fd)
        os.write(status_fd, f"ready {os.getpid()}\n".encode())
        os.close(status_fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.close(output_fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        from rnnbench.child_process import child_main
        code = _exit_code(child_main(json.dumps({**request["payload"], "fd": events_fd})))
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _exit_code(value) -> int:
    """The status `sys.exit(value)` would leave with."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def _reap(statuses: dict[int, int]) -> None:
    """For every child that has exited: kill its process group (what it started dies with it,
    as a fresh child's does), reap it, and send its exit code."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None:
            return
        pid = info.si_pid
        try:
            os.killpg(pid, signal.SIGKILL)  # its PID, and so its group, are reserved until reaped
        except (ProcessLookupError, PermissionError):
            pass
        _, status = os.waitpid(pid, 0)
        fd = statuses.pop(pid, None)
        if fd is not None:
            try:
                os.write(fd, f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
            except OSError:     # the parent no longer listens
                pass
            os.close(fd)


def _end_children(statuses: dict[int, int]) -> None:
    """The parent has gone: kill every child's group and reap them."""
    for pid in list(statuses):
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    while statuses:
        try:
            pid, _ = os.waitpid(-1, 0)
        except ChildProcessError:
            return
        fd = statuses.pop(pid, None)
        if fd is not None:
            os.close(fd)
