"""The built-in families, in the order REPORT.md, ``catalogue list`` and ``--family`` show them.

A claim's family is its id's prefix and its module's name (``catalogue/claims/<family>.py``, or
``<family>_<part>.py`` for a family in several modules); the registry checks that, not this list,
so no claim imports it. Adding a family edits this file alone, and no existing record goes stale.
"""

from __future__ import annotations

__all__ = ["FAMILIES"]

FAMILIES = (
    "dinh2017",
    "lyu2022",
    "wen2023",
    "vardhan2026",
    "label_noise",
    "keskar2017",
    "kaur2023",
    "gatmiry2023",
    "andriushchenko2023",
    "invariance",
    "benchmark",
)
