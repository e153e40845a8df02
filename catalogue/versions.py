"""The versions of everything that can change a number (stored in every record and cache key)."""

from __future__ import annotations

__all__ = ["versions"]


def versions() -> dict[str, str]:
    """Versions of everything that can change a number."""
    import platform
    from importlib import metadata

    import numpy as np
    import scipy
    import torch

    try:
        package = metadata.version("flatness-catalogue")
    except metadata.PackageNotFoundError:
        package = "0+unknown"
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "flatness-catalogue": package,
    }
