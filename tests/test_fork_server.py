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
from test_child_bounds import running as alive

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


def test_a_child_whose_server_died_is_still_killed_with_what_it_started(child_module,
                                                                         own_server):
    with preloaded({"sleeper": True}) as child:
        started = child.next_event(120)
        [server] = own_server.values()
        server.process.kill()
        server.process.wait()
        child.kill()
        assert child.returncode is None     # nobody could say how it ended
        assert not alive(child.process.pid)
    deadline = time.monotonic() + 10
    while alive(started["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(started["pid"])


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
    listing = ("import sys, torch, rnnbench.suites.child; "
               "print(sorted(m for m in sys.modules if m.startswith('torch._inductor')))")
    done = subprocess.run([sys.executable, "-c", listing], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert fork_server.PER_CHILD_ENV == {"TORCHINDUCTOR_CACHE_DIR",
                                         "_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR"}


def test_a_variable_that_torch_reads_at_import_is_never_the_servers(child_module, own_server,
                                                                    monkeypatch):
    with preloaded({"code": 0}) as child:    # the server starts without it
        assert child.forked
        child.next_event(120)
        child.finish()
    monkeypatch.setenv("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")  # torch.compiler.config's
    with preloaded({"code": 0}) as child:
        assert not child.forked


def test_a_child_may_differ_from_the_server_in_inductors_variables_alone(child_module, own_server,
                                                                        monkeypatch):
    # An earlier test's compile may have set it here; the server starts with the first child.
    monkeypatch.delenv("_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR", raising=False)
    for changed in (False, True):
        if changed:     # as this process's first compile does
            monkeypatch.setenv("_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR", "12345")
        with preloaded({"code": 0}) as child:
            assert child.forked
            assert child.next_event(120) == {"event": "done"}
            assert child.finish() == "exited with status 0"
    [server] = own_server.values()
    assert "_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR" not in server.env


ENDINGS = """
import os
import sys
import threading
import time

def main(options, send):
    send("done")
    how = options["how"]
    if how == "thread":     # a non-daemon thread is joined at exit
        threading.Thread(target=lambda: (time.sleep(0.2), print("the thread finished"))).start()
    elif how == "file":     # an open file is flushed at exit
        global kept
        kept = open("kept.txt", "w")
        kept.write("written")
    elif how == "huge":
        sys.exit(2 ** 70)
    elif how == "interrupt":
        raise KeyboardInterrupt
    elif how == "seed":
        import random
        import torch
        print(random.random(), torch.rand(1).item())
    return 0
"""


@pytest.mark.parametrize("how", ["thread", "file", "huge", "interrupt", "seed"])
def test_a_preloaded_child_ends_as_a_fresh_one_ends(tmp_path, monkeypatch, own_server, how):
    (tmp_path / "endings.py").write_text(ENDINGS)
    monkeypatch.chdir(tmp_path)
    seen = {}
    for forked in (False, True, True):
        with ChildProcess("endings", {"how": how}, env=dict(os.environ),
                          preloaded=forked) as child:
            assert child.forked == forked
            assert child.next_event(120) == {"event": "done"}
            ending = child.finish()
            kept = tmp_path / "kept.txt"
            seen.setdefault(forked, []).append((ending, child.last_line(),
                                                kept.read_text() if kept.exists() else None))
            kept.unlink(missing_ok=True)
    fresh, forked = seen[False][0], seen[True]
    if how == "seed":   # fresh seeds in every child, as at a fresh start
        assert len({fresh[1], forked[0][1], forked[1][1]}) == 3
    else:
        assert forked == [fresh, fresh]
        assert {"thread": fresh[1] == "the thread finished", "file": fresh[2] == "written",
                "huge": fresh[0] == "exited with status 255",
                "interrupt": fresh[0] == "was killed by SIGINT"}[how]


def test_a_child_started_from_a_removed_folder_is_a_fresh_process(tmp_path, monkeypatch,
                                                                  own_server):
    (tmp_path / "endings.py").write_text(ENDINGS)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    for removed in (False, True):   # the server starts in the folder, then it goes
        if removed:
            gone.rmdir()
        with ChildProcess("endings", {"how": "huge"}, env=dict(os.environ),
                          preloaded=True) as child:
            assert child.forked != removed
            assert child.next_event(120) == {"event": "done"}
            assert child.finish() == "exited with status 255"
