"""CPU kernel pinning: set before torch loads, recorded with every record, named when a rerun differs."""

import os
import platform
import subprocess
import sys

import pytest

from catalogue.kernels import PINNED, platform_info
from catalogue.verify import _platform_note

X86 = platform.machine().lower() in ("x86_64", "amd64")


@pytest.mark.skipif(not X86, reason="the pinned paths are x86-64 ones")
def test_importing_catalogue_pins_torch_before_it_loads():
    env = {k: v for k, v in os.environ.items() if k not in PINNED}
    code = "import catalogue, torch; print(torch.backends.cpu.get_cpu_capability())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "AVX2"


@pytest.mark.skipif(not X86, reason="the pinned paths are x86-64 ones")
def test_a_user_setting_wins_over_the_default():
    env = {**os.environ, "MKL_CBWR": "COMPATIBLE"}
    code = "import catalogue, os; print(os.environ['MKL_CBWR'])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "COMPATIBLE"


def test_platform_info_names_the_kernel_paths():
    info = platform_info()
    assert {"machine", "cpu", "torch_cpu_capability", *(k.lower() for k in PINNED)} <= set(info)


def test_a_rerun_on_other_kernels_says_so():
    note = _platform_note({"cpu": "A", "mkl_cbwr": "auto"}, {"cpu": "A", "mkl_cbwr": "AVX2"})
    assert note.startswith("platform:") and "mkl_cbwr 'auto' → 'AVX2'" in note and "cpu" not in note
