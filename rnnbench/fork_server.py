"""A fork server: one process that imports torch and a module once and forks children from it.

A fresh Python spends 2-3 s of CPU importing torch before it runs anything, as much as a fast
implementation's quick conformance checks; a child forked from a process that has imported it
starts at once. `ForkServer(entry, modules).start(payload, env, events_fd, output_fd)` returns
a `Forked` child that calls `entry` ("package.module:function", e.g.
`rnnbench.child_process:child_main`) on the payload as a fresh one would, in a session (and so a
process group) of its own, with stdin from /dev/null, stdout and stderr on `output_fd`, the
environment `env` and this process's working directory.

The server is a child of this process in a session of its own, reached over a Unix socket: a
request is one message carrying three descriptors (the child's event and output pipes, and a
status pipe). On the status pipe the child itself writes "ready PID" once it leads its own
session, so that a kill of its process group can never miss it, and the server writes
"exit CODE" (negative: the signal) once the child has exited and its group has been killed,
then reaps it. Lost, when the server died first: the pipe then ends without a status, the
child (if it still runs) is no longer anyone's to reap, and its group is still killed.

The child leaves as a fresh interpreter does (its non-daemon threads joined, `atexit`, open
files flushed, `sys.exit`'s codes), with its own random seeds and its own stdio objects.

What the server read at import time comes from the environment it started with, so a request
whose environment differs from it in any variable but `PER_CHILD_ENV` is refused (`start`
returns None) and the caller starts a fresh process; as is every request once the server has
failed, or without a working directory. Only Linux-like systems with fork and descriptor
passing have a server.
"""
from __future__ import annotations

import atexit
import importlib
import io
import json
import os
import random
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time

# Variables a child's environment may set apart from the server's: read when Inductor is used,
# and neither `import torch` nor the conformance child imports Inductor (a test says so). The
# private compiler cache, and what Inductor sets in the parent once it has compiled.
PER_CHILD_ENV = frozenset({"TORCHINDUCTOR_CACHE_DIR", "_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR"})
READY_TIMEOUT_S = 120.0     # the server's imports come first, on a machine that may be busy
MESSAGE_BYTES = 1 << 20
LAUNCHER = ("import sys; cwd = sys.path.pop(0); import rnnbench.fork_server as server; "
            "sys.path.append(cwd); sys.exit(server.serve(int(sys.argv[1]), sys.argv[2], "
            "sys.argv[3:]))")
# What a fresh child's `python -c` leaves in sys.argv before its payload.
CHILD_ARGV0 = "-c"


def available() -> bool:
    """Whether this platform can run a fork server."""
    return hasattr(os, "fork") and hasattr(socket, "send_fds") and hasattr(socket, "AF_UNIX")


class Forked:
    """A child the server forked: `pid` and `wait()` as `subprocess.Popen` has them, and
    `ended()`; `lost` once the server died before saying how the child ended (`returncode`
    stays None)."""

    def __init__(self, status_fd: int):
        self.status_fd = status_fd
        self.pid = 0
        self.returncode: int | None = None
        self.lost = False
        self.buffer = b""

    def ended(self) -> bool:
        """Whether the child has ended: as the server said, or, once it cannot, as the system
        says."""
        self._read(0)
        return self.returncode is not None or (self.lost and not _alive(self.pid))

    def wait(self) -> int | None:
        """The exit code once the child has ended; None when the server could not say it."""
        while self.returncode is None and not self.lost:
            self._read(None)
        while self.returncode is None and _alive(self.pid):
            time.sleep(0.05)    # no longer ours to reap: someone else reaps it once it ends
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
            self.close()
            self.lost = self.returncode is None

    def close(self) -> None:
        if self.status_fd >= 0:
            os.close(self.status_fd)
            self.status_fd = -1


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie that nobody reaps does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except FileNotFoundError:
        return False
    except OSError:     # no /proc
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, PermissionError):  # another user's process has its number
            return False
        return True


class ForkServer:
    """The parent's side: the server process and the socket to it (see the module)."""

    def __init__(self, entry: str, modules: list[str]):
        self.env = dict(os.environ)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", LAUNCHER, str(theirs.fileno()), entry, *modules],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.socket = ours
        self.failed = False

    def start(self, payload: dict, env: dict, events_fd: int, output_fd: int) -> Forked | None:
        """A forked child running the entry on `payload`, in this process's working directory;
        None when this server cannot start it as a fresh process would (another environment,
        no working directory, or the server failed)."""
        if self.failed or _differs(env, self.env):
            return None
        try:
            cwd = os.getcwd()
        except OSError:     # removed: a fresh child still starts in it
            return None
        status_read, status_write = os.pipe()
        forked = Forked(status_read)
        request = json.dumps({"payload": payload, "env": env, "cwd": cwd}).encode()
        try:
            # One message, sent whole, and each child has its own status pipe: no lock.
            socket.send_fds(self.socket, [request], [events_fd, output_fd, status_write])
            sent = True
        except OSError:
            sent = False
        finally:
            os.close(status_write)
        if sent:
            try:
                forked.pid = _ready_pid(forked, READY_TIMEOUT_S)
            except BaseException:
                forked.close()
                raise
        if not forked.pid:  # not sent, or no fork: a dead or stuck server, or fork failed there
            self.failed = True
            forked.close()
            return None
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
    keys = (set(env) | set(started)) - PER_CHILD_ENV
    return any(env.get(key) != started.get(key) for key in keys)


def _ready_pid(forked: Forked, timeout: float) -> int:
    """The PID from the child's "ready" line, within `timeout` seconds; 0 without one."""
    deadline = time.monotonic() + timeout
    while b"\n" not in forked.buffer and forked.status_fd >= 0:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return 0
        forked._read(remaining)
    line = forked.buffer.split(b"\n", 1)[0]
    return int(line.split()[1]) if line.startswith(b"ready ") else 0


_servers: dict[tuple[str, ...], ForkServer] = {}
_servers_lock = threading.Lock()


def shared_server(entry: str, modules: list[str]) -> ForkServer | None:
    """This process's server of `entry` with `modules` imported, started on first use and ended
    at exit; None where the platform has none."""
    if not available():
        return None
    key = (entry, *modules)
    with _servers_lock:
        if key not in _servers:
            _servers[key] = ForkServer(entry, modules)
            if len(_servers) == 1:
                atexit.register(_close_all)
        return _servers[key]


def _close_all() -> None:
    for server in _servers.values():
        server.close()
    _servers.clear()


# --- the server's side ---------------------------------------------------------------------

def serve(socket_fd: int, entry: str, modules: list[str]) -> int:
    """Import `modules` and `entry`'s, then fork a child per request that calls `entry` on its
    payload (with "fd", its event pipe), until the socket closes. Returns the child's exit
    code in a forked child (the launcher's `sys.exit` ends it as a fresh one ends); exits 3
    without serving when an import left a Python thread running (a fork keeps only the forking
    thread; the BLAS thread pool NumPy starts at import handles a fork itself) or initialised
    CUDA (which a forked child cannot use)."""
    for module in modules:
        importlib.import_module(module)
    module, function = entry.split(":")
    main = getattr(importlib.import_module(module), function)
    torch = sys.modules.get("torch")
    if threading.active_count() > 1 or (torch is not None and torch.cuda.is_initialized()):
        return 3
    requests = socket.socket(fileno=socket_fd)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(requests, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    statuses: dict[int, int] = {}
    while True:
        for key, _ in selector.select():
            if key.fd == wake_read:
                os.read(wake_read, 4096)
                continue
            message, fds, _, _ = socket.recv_fds(requests, MESSAGE_BYTES, 3)
            if not message:
                _end_children(statuses)
                os._exit(0)     # nothing to flush; torch's teardown would hold the parent
            events_fd, output_fd, status_fd = fds
            try:
                pid = os.fork()
            except OSError:     # the parent then sees no "ready"
                pid = None
            if pid == 0:
                # The server's objects and descriptors go; the child returns to the launcher.
                selector.close()
                requests.close()
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for fd in (wake_read, wake_write, *statuses.values()):
                    os.close(fd)
                return _child(main, json.loads(message), events_fd, output_fd, status_fd)
            os.close(events_fd)
            os.close(output_fd)
            if pid is None:
                os.close(status_fd)
            else:
                statuses[pid] = status_fd
        _reap(statuses)


def _child(main, request: dict, events_fd: int, output_fd: int, status_fd: int):
    """The forked child: what `subprocess.Popen` and `child_process.LAUNCHER` give a fresh one
    (a session, stdin from /dev/null, stdout and stderr on the output pipe, the environment,
    the working directory, sys.argv, fresh random seeds), then `main`'s exit code."""
    os.setsid()
    os.write(status_fd, f"ready {os.getpid()}\n".encode())
    os.close(status_fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.close(output_fd)
    # The server's stdio objects were made for /dev/null: new ones, as a fresh start makes.
    unbuffered = sys.stdout.write_through   # python -u, PYTHONUNBUFFERED
    sys.stdout = sys.__stdout__ = _stdio(1, sys.stdout, False, unbuffered)
    sys.stderr = sys.__stderr__ = _stdio(2, sys.stderr, True, unbuffered)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    payload = json.dumps({**request["payload"], "fd": events_fd})
    sys.argv = [CHILD_ARGV0, payload]
    # Seeded from the system's entropy, as at a fresh import.
    random.seed()
    if "torch" in sys.modules:
        sys.modules["torch"].seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    return main(payload)


def _stdio(fd: int, like, line_buffering: bool, unbuffered: bool) -> io.TextIOWrapper:
    """A text stream on `fd` as Python makes stdout (not line-buffered on a pipe) or stderr
    (line-buffered) at start: `like`'s encoding and errors, unbuffered under `-u`."""
    binary = open(fd, "wb", buffering=0 if unbuffered else -1, closefd=False)
    return io.TextIOWrapper(binary, encoding=like.encoding, errors=like.errors,
                            line_buffering=line_buffering, write_through=unbuffered)


def _reap(statuses: dict[int, int]) -> None:
    """For every child that has exited: kill its process group (what it started dies with it,
    as a fresh child's does), send its exit code, and reap it: its number, and so its group's,
    stays reserved until the parent can have read the code."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None:
            return
        pid = info.si_pid
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        code = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        fd = statuses.pop(pid, None)
        if fd is not None:
            try:
                os.write(fd, f"exit {code}\n".encode())
            except OSError:     # the parent no longer listens
                pass
            os.close(fd)
        os.waitpid(pid, 0)


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
