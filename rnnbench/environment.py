"""The environment a result was measured in, captured with every results file."""
from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path

# The checkout rnnbench runs from, when it runs from one (an editable install or a clone).
SOURCE_ROOT = Path(__file__).resolve().parents[1]


def cpu_model() -> str:
    """The CPU's marketing name where the OS tells it, else the platform's processor string."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def source_commit(root: Path = SOURCE_ROOT) -> str | None:
    """`git rev-parse HEAD` of the checkout at `root`; None when rnnbench is not running from
    a git checkout of its own (an installed wheel, no git, a folder inside another project)."""
    try:
        done = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel", "HEAD"],
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.split()
    if done.returncode != 0 or len(lines) != 2:
        return None
    top, commit = lines
    # A site-packages folder inside someone's repository is not rnnbench's checkout.
    return commit if Path(top).resolve() == root.resolve() else None


def capture() -> dict:
    """When (UTC), versions, the commit measured, hardware and thread settings, as a
    JSON-ready dict."""
    import torch

    import rnnbench

    cuda = torch.cuda.is_available()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "rnnbench": rnnbench.__version__,
        "commit": source_commit(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "gpu": torch.cuda.get_device_name(0) if cuda else None,
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "hostname": platform.node(),
    }
