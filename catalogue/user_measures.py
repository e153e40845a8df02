"""A measure named by a user: a panel name, ``module:function``, ``path/to/file.py:function`` or an
entry point of the ``flatness_catalogue.measures`` group.

A measure is a callable ``measure(obj: Objective, seed: int) -> float | Estimate``, optionally with
an ``applies(obj) -> bool`` attribute (default: applies everywhere). A plain float becomes an
``Estimate`` with no error bar (``error_kind="none"``).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import math
import sys
from pathlib import Path

from evaluators import Estimate, Objective
from evaluators.panel import PANEL, Measure

__all__ = ["ENTRY_POINT_GROUP", "MeasureSpecError", "load_measure"]

ENTRY_POINT_GROUP = "flatness_catalogue.measures"


class MeasureSpecError(ValueError):
    """A measure name that cannot be turned into a callable measure (one line, names the spec)."""


def _from_file(path: Path, name: str):
    if not path.is_file():
        raise MeasureSpecError(f"measure {path}:{name}: no such file")
    module_name = f"flatness_catalogue_user_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise MeasureSpecError(f"measure {path}:{name}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's file, whatever it raises
        raise MeasureSpecError(
            f"measure {path}:{name}: importing the file failed: {type(exc).__name__}: {exc}"
        ) from None
    return module


def _resolve(spec: str):
    panel = {m.name: m for m in PANEL}
    if spec in panel:
        return panel[spec]
    entry_points = {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    if spec in entry_points:
        try:
            return entry_points[spec].load()
        except Exception as exc:
            raise MeasureSpecError(
                f"measure {spec}: loading its entry point failed: {type(exc).__name__}: {exc}"
            ) from None
    target, sep, name = spec.rpartition(":")
    if not sep or not target or not name:
        known = ", ".join(sorted(panel))
        raise MeasureSpecError(
            f"measure {spec!r}: not a panel measure ({known}), an entry point of {ENTRY_POINT_GROUP}, "
            "module:function or path/to/file.py:function"
        )
    if target.endswith(".py") or "/" in target:
        module = _from_file(Path(target), name)
    else:
        try:
            module = importlib.import_module(target)
        except Exception as exc:
            raise MeasureSpecError(f"measure {spec}: cannot import {target}: {type(exc).__name__}: {exc}") from None
    if not hasattr(module, name):
        raise MeasureSpecError(f"measure {spec}: {target} has no attribute {name!r}")
    return getattr(module, name)


def _takes_objective_and_seed(fn) -> bool:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    try:
        signature.bind(None, 0)
    except TypeError:
        return False
    return True


def load_measure(spec: str) -> Measure:
    """The measure ``spec`` names, as a panel :class:`~evaluators.panel.Measure`.

    Raises:
        MeasureSpecError: the file, module or attribute does not exist, does not import, or is not
            a callable taking ``(obj, seed)``.
    """
    found = _resolve(spec)
    if isinstance(found, Measure):
        return found
    if not callable(found):
        raise MeasureSpecError(f"measure {spec}: {type(found).__name__} is not callable")
    if not _takes_objective_and_seed(found):
        raise MeasureSpecError(f"measure {spec}: must be callable as measure(obj: Objective, seed: int)")
    applies = getattr(found, "applies", None)
    if applies is not None and not callable(applies):
        raise MeasureSpecError(f"measure {spec}: its applies attribute is not callable")

    def compute(obj: Objective, seed: int) -> Estimate:
        value = found(obj, seed)
        if isinstance(value, Estimate):
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"returned {type(value).__name__}, not a float or an Estimate")
        if not math.isfinite(float(value)):
            raise ValueError(f"returned {value}")
        return Estimate(float(value), 0.0, "none")

    theory = getattr(found, "theory", {})
    if not isinstance(theory, dict) or not all(v in (True, False, None) for v in theory.values()):
        raise MeasureSpecError(f"measure {spec}: theory must map symmetries to True, False or None")
    return Measure(spec, compute, applies or (lambda obj: True), stochastic=False, theory=dict(theory))
