"""The environment a result was measured in, captured with every results file."""
from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path

# The checkout rnnbench runs from, when it runs from one (an editable install or a clone).
SOURCE_ROOT = Path(__file__).resolve().parents[1]


def _cpuinfo(*fields: str) -> str | None:
    """The value of the first /proc/cpuinfo line naming one of `fields`; None where there is
    none (no such line, or no /proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name.strip() in fields:
                    return value.strip()
    except OSError:
        pass
    return None


def cpu_model() -> str:
    """The CPU's marketing name where the OS tells it, else the platform's processor string."""
    model = _cpuinfo("model name")
    return model if model is not None else platform.processor() or platform.machine()


# The vector extensions that decide which kernels a CPU runs (MKL's, oneDNN's, a -march=native
# build's): a machine with AVX-512 and one with AVX2 only time the same code differently.
VECTOR_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
                "amx_tile", "sve", "asimd")


def cpu_flags() -> str:
    """The CPU's vector extensions among VECTOR_FLAGS, space-separated ("avx avx2 fma"), from
    /proc/cpuinfo; torch's own capability string ("AVX2") where the OS does not list flags."""
    listed = _cpuinfo("flags", "Features")
    if listed is not None:
        present = set(listed.split())
        return " ".join(flag for flag in VECTOR_FLAGS if flag in present)
    import torch

    return torch.backends.cpu.get_cpu_capability().lower()


# Settings that keep a library, or fused's build, to fewer vector extensions than the CPU has:
# oneDNN's, MKL's and ATen's own kernels, and the CPU fused's kernels are built for. A run under
# them times another machine's code paths on this one.
FUSED_MARCH = "RNNBENCH_FUSED_MARCH"  # the CPU fused's kernels are built for (gcc's -march)
ISA_LIMITS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS",
              "ATEN_CPU_CAPABILITY", FUSED_MARCH)
# The values of those that limit nothing: their defaults.
NO_LIMIT = {"ONEDNN_MAX_CPU_ISA": "all", "DNNL_MAX_CPU_ISA": "all", FUSED_MARCH: "native"}


def isa_limits() -> str:
    """The ISA_LIMITS this process runs under, "NAME=value" space-separated; "" for none."""
    return " ".join(f"{name}={os.environ[name]}" for name in ISA_LIMITS
                    if os.environ.get(name) and os.environ[name].lower() != NO_LIMIT.get(name))


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
        "cpu_flags": cpu_flags(),
        "isa_limits": isa_limits(),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "hostname": platform.node(),
    }
