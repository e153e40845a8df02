"""One CPU kernel path for every run, so a record's numbers repeat on another x86 machine.

torch (ATen's vectorized loops, MKL's BLAS/LAPACK) and OpenBLAS pick their kernels by the CPU they
find: an AVX-512 machine sums in a different order than an AVX2 one, and a trained net's
round-off grows into visibly different numbers (an L-BFGS fit's λ1 moved by 10% between two
machines with the same library versions). Pinning every library to its AVX2 path, which every
x86-64 machine of the last decade has, makes the same spec give the same bits there. Each
variable is only a default: set it in the environment to choose another path (the record's
``platform`` shows what a run used). The variables are read when the libraries load, so
:func:`pin_kernels` runs when ``catalogue`` is imported, before torch.
"""

from __future__ import annotations

import os
import platform

__all__ = ["PINNED", "pin_kernels", "platform_info"]

PINNED = {
    "ATEN_CPU_CAPABILITY": "avx2",  # torch's vectorized CPU kernels
    "MKL_CBWR": "AVX2",  # MKL's conditional numerical reproducibility branch
    "OPENBLAS_CORETYPE": "Haswell",  # numpy's and scipy's OpenBLAS
}


def pin_kernels() -> None:
    """Set the pinned kernel paths as environment defaults (x86-64 only; elsewhere nothing applies).

    Also gives numba a one-thread pool (``NUMBA_NUM_THREADS=1``): every claim computes on one
    thread (see ``runner.run_job``), and a larger pool hands each epoch of the compiled 1-SAM step
    to a worker thread and back, which slowed a paper run 8× while a second process shared the
    two cores (measured). No number depends on it (runs are independent; each is sequential).
    """
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    if platform.machine().lower() in ("x86_64", "amd64"):
        for name, value in PINNED.items():
            os.environ.setdefault(name, value)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def platform_info() -> dict[str, str]:
    """The machine and the kernel paths a run used (stored with each record; not part of its content)."""
    import torch

    return {
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "torch_cpu_capability": str(torch.backends.cpu.get_cpu_capability()),
        **{name.lower(): os.environ.get(name, "auto") for name in PINNED},
    }
