"""A conformance child forked from the server that imported torch once starts as a fresh process
would (its own session, output, environment, working directory), ends as one would (its exit
code or signal, whatever it started killed with it), and nothing about the server is ever read
as the child's doing: concurrent starts keep their own exit codes, and a dead server is said."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from rnnbench import fork_server
from rnnbench.child_process import ChildProcess

pytestmark = pytest.mark.skipif(not fork_server.available(), reason="needs fork and fd passing")

CHILD = """
import os
import subprocess
import time

def main(options, send):
    print(os.getppid(), os.getsid(0) == os.getpid(), os.getcwd(),
          os.environ.get("TORCHINDUCTOR_CACHE_DIR"), flush=True)
    if options.get("sleeper"):
        sleeper = subprocess.Popen(["sleep", "600"])
        send("started", pid=sleeper.pid)
        time.sleep(600)
    send("done")
    if options.get("crash"):
        os.kill(os.getpid(), 9)
    if options.get("hold"):
        time.sleep(options["hold"])
    return options.get("code", 0)
"""


@pytest.fixture
def child_module(tmp_path, monkeypatch):
    (tmp_path / "forked_child.py").write_text(CHILD)
    monkeypatch.chdir(tmp_path)     # where the child module is, as a user's file would be
    return tmp_path


@pytest.fixture
def own_server(monkeypatch):
    """A server of this test's own, ended after it: a test that kills it spoils no other."""
    monkeypatch.setattr(fork_server, "_servers", {})
    yield fork_server._servers
    for server in fork_server._servers.values():
        server.close()


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def preloaded(options: dict, cache: str = "/tmp/private-cache") -> ChildProcess:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}  # as a private compiler cache is
    return ChildProcess("forked_child", options, env=env, preloaded=True)


@pytest.mark.parametrize("options, ending", [({"code": 3}, "exited with status 3"),
                                             ({"crash": True}, "was killed by SIGKILL")])
def test_a_preloaded_child_starts_and_ends_as_a_fresh_one(child_module, own_server, options,
                                                          ending):
    with preloaded(options, cache=str(child_module / "cache")) as child:
        assert child.forked
        assert child.next_event(120) == {"event": "done"}
        assert child.finish() == ending
        parent, leader, cwd, cache = child.last_line().split()
    [server] = own_server.values()
    assert int(parent) == server.process.pid
    assert (leader, cwd, cache) == ("True", str(child_module), str(child_module / "cache"))


def test_a_child_in_another_environment_is_a_fresh_process(child_module, own_server):
    env = {**os.environ, "SOMETHING_TORCH_READS_AT_IMPORT": "1"}
    with ChildProcess("forked_child", {"code": 0}, env=env, preloaded=True) as child:
        assert not child.forked
        assert child.next_event(120) == {"event": "done"}
        assert child.finish() == "exited with status 0"


def test_killing_a_preloaded_child_kills_what_it_started(child_module, own_server):
    with preloaded({"sleeper": True}) as child:
        started = child.next_event(120)
        assert started["event"] == "started" and alive(started["pid"])
        child.kill()
        assert child.returncode == -9
    deadline = time.monotonic() + 10
    while alive(started["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(started["pid"])


def test_children_started_at_once_from_two_threads_keep_their_own_exit_codes(child_module,
                                                                           own_server):
    endings: dict[int, str] = {}

    def start(codes):
        for code in codes:
            with preloaded({"code": code, "hold": 0.01 * (code % 3)}) as child:
                assert child.forked
                child.next_event(120)
                endings[code] = child.finish()

    threads = [threading.Thread(target=start, args=(range(first, 40, 2),)) for first in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert endings == {code: f"exited with status {code}" for code in range(1, 40)}


def test_a_dead_server_is_said_and_the_next_child_starts_fresh(child_module, own_server):
    with preloaded({"hold": 2}) as child:
        assert child.next_event(120) == {"event": "done"}
        [server] = own_server.values()
        server.process.kill()
        server.process.wait()
        assert child.next_event(30) is None
        assert child.finish() == ("ended, and the fork server that started it ended before "
                                  "saying how")
        assert child.returncode is None
    with preloaded({"code": 5}) as child:
        assert not child.forked
        assert child.next_event(120) == {"event": "done"}
        assert child.finish() == "exited with status 5"


def test_the_server_imports_nothing_that_reads_the_variables_a_child_may_change():
    # Inductor reads its variables when it is used; were it imported with torch or the
    # conformance child, a forked child would run with the server's values of them.
    done = subprocess.run([sys.executable, "-c",
                           "import sys, torch, rnnbench.suites.child; "
                           "print(sorted(m for m in sys.modules if m.startswith('torch._inductor')))"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert all(prefix.lstrip("_").startswith("TORCHINDUCTOR_")
               for prefix in fork_server.PER_CHILD_PREFIXES)


def test_a_child_may_differ_from_the_server_in_inductors_variables_alone(child_module, own_server,
                                                                        monkeypatch):
    for changed in (False, True):   # the server starts with the first child
        if changed:     # as this process's first compile does
            monkeypatch.setenv("_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR", "12345")
        with preloaded({"code": 0}) as child:
            assert child.forked
            assert child.next_event(120) == {"event": "done"}
            assert child.finish() == "exited with status 0"
    [server] = own_server.values()
    assert "_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR" not in server.env
