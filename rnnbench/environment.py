"""The environment a result was measured in, captured with every results file."""
from __future__ import annotations

import os
import platform


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


def capture() -> dict:
    """Versions, hardware and thread settings, as a JSON-ready dict."""
    import torch

    import rnnbench

    cuda = torch.cuda.is_available()
    return {
        "rnnbench": rnnbench.__version__,
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
