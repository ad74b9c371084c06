"""A child process that runs code rnnbench does not trust: isolated, bounded, and always ended.

`ChildProcess(module, options)` starts a fresh Python that imports `module` and calls its
`main(options, send)`; `send(event, **fields)` writes one JSON event per line on a pipe of its
own, apart from what the code prints. The parent reads the events with a deadline
(`next_event`), so a child that hangs is found out, and one that dies says how (`finish`).
With `preloaded=True` the child is forked from a server that has imported torch and `module`
(`rnnbench.fork_server`), where one can start it as this would; else it is a fresh process.

Bounds, whatever the code does:
- **memory**: the child's private writable memory (RLIMIT_DATA: its heap, arrays and tensors;
  not the shared libraries or the address space CUDA reserves) is limited to `memory_limit`
  bytes, by default MEMORY_FRACTION of the machine's; past it allocations fail, and
  `exceeded_memory` recognises the errors that follow;
- **output**: what it prints is read as it comes and only the last `tail_bytes` are kept;
- **processes**: it runs in a process group of its own, and the whole group is killed however
  the child ends, so nothing it started (a compiler, a process forked at import) outlives it.
"""
from __future__ import annotations

import importlib
import json
import os
import resource
import selectors
import signal
import subprocess
import sys
import time

from rnnbench import fork_server
from rnnbench.printable import printable

MEMORY_FRACTION = 0.5
TAIL_BYTES = 64 << 10
GIB = 1 << 30
# The child imports rnnbench, not a folder of that name in the working directory, which
# `python -c` would put first on sys.path; the working directory stays importable, last.
LAUNCHER = ("import sys; cwd = sys.path.pop(0); import rnnbench.child_process as child; "
            "sys.path.append(cwd); sys.exit(child.child_main(sys.argv[1]))")
# How a failed allocation reads: Python's MemoryError, torch's and NumPy's messages, C++'s.
_MEMORY_ERRORS = ("MemoryError", "can't allocate memory", "Cannot allocate memory",
                  "Unable to allocate", "bad_alloc", "out of memory")


def default_memory_limit() -> int | None:
    """MEMORY_FRACTION of this machine's physical memory in bytes; None where unknown."""
    try:
        return int(MEMORY_FRACTION * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError):
        return None


def memory_limit_text(limit: int) -> str:
    """A memory limit as people say it: "11.5 GiB"."""
    return f"{limit / GIB:.3g} GiB"


def exceeded_memory(text: str) -> bool:
    """Whether an error message (or a child's last output) says an allocation failed."""
    return any(sign in text for sign in _MEMORY_ERRORS)


def end_descendants() -> None:
    """Kill every process this one started, directly or not, that still runs: what an
    interrupted command leaves behind outside its isolated children (a compiler that a build
    thread started). Read from /proc; nothing happens where there is none."""
    parents: dict[int, list[int]] = {}
    try:
        entries = [entry.name for entry in os.scandir("/proc") if entry.name.isdigit()]
    except OSError:
        return
    for pid in entries:
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                # "pid (command) state ppid ...": the command may hold spaces and parentheses.
                ppid = int(stat.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(pid))
    pending, found = [os.getpid()], []
    while pending:
        children = parents.get(pending.pop(), [])
        found += children
        pending += children
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def child_main(options_json: str) -> int:
    """The child's side (see LAUNCHER): the memory limit, then `module.main(options, send)`."""
    options = json.loads(options_json)
    limit = options.get("memory_limit")
    if limit:
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    main = importlib.import_module(options["module"]).main
    with os.fdopen(options["fd"], "w", buffering=1) as channel:
        def send(event: str, **fields) -> None:
            channel.write(json.dumps({"event": event, **fields}) + "\n")
            channel.flush()

        return main(options, send)


class ChildProcess:
    """One child process (see the module) and the parent's ends of its event and output pipes."""

    def __init__(self, module: str, options: dict, *, memory_limit: int | None = None,
                 tail_bytes: int = TAIL_BYTES, env: dict | None = None, preloaded: bool = False):
        events_read, events_write = os.pipe()
        output_read, output_write = os.pipe()
        payload = {**options, "module": module, "fd": events_write, "memory_limit": memory_limit}
        try:
            forked = None
            if preloaded and (server := fork_server.shared_server(f"{__name__}:child_main",
                                                                  ["torch", module])):
                forked = server.start(payload, dict(os.environ) if env is None else env,
                                      events_write, output_write)
            self.forked = forked is not None
            self.process = forked or subprocess.Popen(
                [sys.executable, "-c", LAUNCHER, json.dumps(payload)], stdin=subprocess.DEVNULL,
                stdout=output_write, stderr=output_write, pass_fds=(events_write,), env=env,
                start_new_session=True)     # its own process group: see `_end`
        except BaseException:
            os.close(events_read)
            os.close(output_read)
            raise
        finally:
            os.close(events_write)
            os.close(output_write)
        self.tail_bytes = tail_bytes
        self.tail = bytearray()
        self.buffer = b""
        self.selector = selectors.DefaultSelector()
        self.selector.register(events_read, selectors.EVENT_READ, "events")
        self.selector.register(output_read, selectors.EVENT_READ, "output")
        self.events_open = True
        self.closed = False
        self.ended = False
        self.returncode: int | None = None  # None after `_end` too when the fork server died

    def __enter__(self) -> "ChildProcess":
        return self

    def __exit__(self, *exc_info) -> None:
        self.kill()

    def next_event(self, timeout: float) -> dict | None:
        """The next event; None once the child closed its end (it is exiting); TimeoutError
        when none came within `timeout` seconds. Lines that are not events are skipped."""
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    return event
            if not self.events_open:
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            self._read(remaining)

    def _read(self, timeout: float) -> None:
        """Read what is ready on either pipe within `timeout` seconds."""
        for key, _ in self.selector.select(timeout):
            chunk = os.read(key.fd, 1 << 16)
            if key.data == "output":
                self.tail += chunk
                del self.tail[:-self.tail_bytes]
            else:
                self.buffer += chunk
            if not chunk:
                self.selector.unregister(key.fd)
                os.close(key.fd)
                if key.data == "events":
                    self.events_open = False

    def finish(self, grace_s: float = 10.0) -> str:
        """Wait for the exiting child (killing it after `grace_s`), end its process group; how
        it ended, in words: "exited with status 3", "was killed by SIGSEGV"."""
        deadline = time.monotonic() + grace_s
        while not self._exited():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                return "stopped answering and was killed"
            if not self.closed and self.selector.get_map():
                self._read(min(remaining, 0.05))
            else:
                time.sleep(min(remaining, 0.05))
        self._end()
        code = self.returncode
        if code is None:
            return "ended, and the fork server that started it ended before saying how"
        if code < 0:
            return f"was killed by {signal.Signals(-code).name}"
        return f"exited with status {code}"

    def kill(self) -> None:
        """Kill the child and its process group now (nothing happens if it has ended)."""
        self._end()

    def last_line(self, marker: str = "") -> str:
        """The last non-empty line the child printed, made printable; "" if none. With a
        `marker`: what follows it on the last line that has it, whole (output the child wrote
        without a newline may come before it on that line)."""
        lines = [line.strip() for line in self.tail.decode(errors="replace").splitlines()]
        lines = [line for line in lines if line and marker in line]
        if not lines:
            return ""
        return printable(lines[-1].rpartition(marker)[2] if marker else lines[-1][:200])

    def _exited(self) -> bool:
        """Whether the child has exited, without reaping it: its process ID, and so its group
        ID, stays reserved until `_end` has killed the group."""
        if self.ended:
            return True
        if self.forked:     # the server reaps it once it has killed its group
            return self.process.ended()
        try:
            return os.waitid(os.P_PID, self.process.pid,
                             os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    def _end(self) -> None:
        """Kill the process group (the child, if running, and whatever it started), reap the
        child, close the pipes."""
        if not self.ended:
            # A forked child's group the server killed before it sent the exit code.
            reported = self.forked and self.process.ended() and self.process.returncode is not None
            if not reported:
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            self.returncode = self.process.wait()
            self.ended = True
        if not self.closed:
            for key in list(self.selector.get_map().values()):
                os.close(key.fd)
            self.selector.close()
            self.closed, self.events_open = True, False
