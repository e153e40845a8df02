"""Claims and their outcomes (the pydantic boundary a check returns through)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from catalogue import seeding
from catalogue.parallel import Execution
from catalogue.rules import Rule
from constructions.specs import Spec

__all__ = [
    "Verdict",
    "ControlExpectation",
    "Source",
    "Series",
    "Figure",
    "Table",
    "Outcome",
    "Claim",
    "ClaimContext",
    "ClaimKind",
    "Control",
    "KINDS",
    "MODES",
    "jsonable",
]

Verdict = Literal["holds", "refuted", "inconclusive"]
KINDS_OF_VERDICT: tuple[Verdict, ...] = ("holds", "refuted", "inconclusive")
ControlExpectation = Literal["holds", "refuted", "inconclusive", "not refuted", "not holds"]
ClaimKind = Literal["identity", "construction", "empirical"]
KINDS: tuple[ClaimKind, ...] = ("identity", "construction", "empirical")
MODES = ("quick", "full", "paper")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Source(_Frozen):
    """Where a statement comes from."""

    paper: str
    arxiv: str | None = None
    locator: str = Field(description="theorem, lemma, figure or table in the paper")
    seed: str | None = Field(default=None, description="the seed document in ../shared/seeds/")

    @classmethod
    def citing(cls, paper: str, arxiv: str | None = None, seed: str | None = None) -> Callable[[str], Source]:
        """The sources of one paper by locator: ``source = Source.citing(PAPER, ARXIV, SEED)``, then
        ``source("Theorem 3")``."""
        return lambda locator: cls(paper=paper, arxiv=arxiv, locator=locator, seed=seed)

    def cite(self) -> str:
        arxiv = f", arXiv {self.arxiv}" if self.arxiv else ""
        return f"{self.paper}{arxiv}, {self.locator}"


class Series(_Frozen):
    """One curve of a figure: ``style`` line, scatter, or hline (a reference level in ``y[0]``).

    ``lower`` and ``upper`` (empty, or one entry per point) bound an interval around each y, drawn
    as a band (lines) or whiskers (markers, scatter); the label says what interval it is.
    """

    label: str
    x: list[float | None] = Field(default_factory=list)
    y: list[float | None]
    lower: list[float | None] = Field(default_factory=list)
    upper: list[float | None] = Field(default_factory=list)
    style: Literal["line", "scatter", "hline", "markers"] = "line"

    @field_validator("x", "y", "lower", "upper", mode="before")
    @classmethod
    def _finite_or_none(cls, values: list) -> list:
        """Non-finite points become gaps (None) instead of breaking the JSON record."""
        out = []
        for v in values:
            v = None if v is None else float(v)
            out.append(v if v is not None and math.isfinite(v) else None)
        return out

    @model_validator(mode="after")
    def _interval_per_point(self) -> Series:
        if (len(self.lower), len(self.upper)) not in ((0, 0), (len(self.y), len(self.y))):
            raise ValueError(f"series {self.label!r}: lower and upper need one entry per point or none")
        return self

    @classmethod
    def mean_band(cls, label: str, x, samples, *, log: bool = False, style: str = "line") -> Series:
        """The mean over the rows of ``samples`` (runs × points) with ± 2 standard errors of the
        mean; ``log``: the geometric mean with its band on the log scale."""
        values = np.log(np.asarray(samples, dtype=float)) if log else np.asarray(samples, dtype=float)
        mean = values.mean(axis=0)
        half = 2 * values.std(axis=0, ddof=1) / np.sqrt(values.shape[0]) if values.shape[0] > 1 else 0 * mean
        back = np.exp if log else (lambda v: v)
        suffix = " (band: ± 2 s.e. of the log)" if log else " (band: ± 2 s.e.)"
        return cls(
            label=label + suffix if values.shape[0] > 1 else label,
            x=list(x),
            y=back(mean).tolist(),
            lower=back(mean - half).tolist() if values.shape[0] > 1 else [],
            upper=back(mean + half).tolist() if values.shape[0] > 1 else [],
            style=style,
        )


class Figure(_Frozen):
    """A plot a claim asks the report to draw from its own numbers."""

    name: str
    title: str
    xlabel: str
    ylabel: str
    series: list[Series]
    logx: bool = False
    logy: bool = False


class Table(_Frozen):
    """A table of evidence for the report."""

    name: str
    headers: list[str]
    rows: list[list[Any]]


class Outcome(_Frozen):
    """What a claim's check returns: the verdict is left out (None) when the claim declares a rule,
    which the runner applies to ``evidence``."""

    verdict: Verdict | None = None
    evidence: dict[str, Any]
    thresholds: dict[str, Any] = Field(default_factory=dict)
    figures: list[Figure] = Field(default_factory=list)
    tables: list[Table] = Field(default_factory=list)
    notes: str = ""

    @field_validator("evidence", "thresholds", mode="before")
    @classmethod
    def _to_json(cls, value: dict[str, Any]) -> dict[str, Any]:
        return jsonable(value)


def jsonable(value: Any) -> Any:
    """Numbers from numpy/torch as plain floats/ints/lists; NaN and ±inf as strings."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, torch.Tensor):
        return jsonable(value.detach().cpu().numpy())
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.bool_ | bool):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating | float):
        value = float(value)
        return value if math.isfinite(value) else str(value)
    return value


@dataclass(frozen=True)
class Control:
    """A negative control: the claim's own check and verdict rule, run on its spec with ``changes``
    applied, where the claim's premise is broken and the verdict should come out ``expect``.

    A control whose verdict differs from the claim's own is what shows the check can fail. ``expect``
    is a verdict, or ``"not refuted"`` / ``"not holds"`` where the control's sizes decide between the
    other two (a null measure scored on 12 models is not resolved as weak, on 128 it is). An
    identity's control injects a violation (a net that is not positively homogeneous, a map that
    is not the symmetry) that the check must catch.

    ``changes`` maps a field of the parameters to its new value; a dict value updates the fields
    of a nested spec, or of every spec in a tuple of them (``{"scenarios": {"activation": "tanh"}}``).
    """

    name: str
    breaks: str
    expect: ControlExpectation
    changes: dict[str, Any]

    def came_out(self, verdict: str) -> bool:
        """Whether ``verdict`` is what the control declares."""
        if self.expect.startswith("not "):
            return verdict in KINDS_OF_VERDICT and verdict != self.expect.removeprefix("not ")
        return verdict == self.expect

    def apply(self, spec: Spec) -> Spec:
        """``spec`` with the changes, validated as the same parameter type."""
        data = spec.model_dump(mode="json")
        for key, value in self.changes.items():
            if key not in data:
                raise ValueError(f"control {self.name!r}: {type(spec).__name__} has no field {key!r}")
            if isinstance(value, dict) and isinstance(data[key], list):
                data[key] = [{**item, **value} for item in data[key]]
            elif isinstance(value, dict) and isinstance(data[key], dict):
                data[key] = {**data[key], **value}
            else:
                data[key] = jsonable(value)
        return type(spec).model_validate(data)


@dataclass(frozen=True)
class ClaimContext:
    """What a check gets besides its parameters: the seeding of this run, where it may keep files
    (``artifacts``: the records directory, None when there is none), and how it may parallelize
    (``execution``, used only by claims registered with ``parallel=True``), where long training
    keeps its checkpoints (``checkpoints``: None to keep none) and whether it shows progress bars."""

    spec_hash: str
    seed: int
    mode: str
    artifacts: Path | None = None
    execution: Execution = field(default_factory=Execution)
    checkpoints: Path | None = None
    progress: bool = False

    def seed_for(self, tag: str, repetition: int = 0) -> int:
        """The derived seed for one named random draw of this run."""
        return seeding.derive_seed(self.spec_hash, repetition, self.seed, tag)

    def int_seed(self, tag: str, repetition: int = 0) -> int:
        """The derived seed folded to 31 bits, for the ``seed=`` arguments of evaluators."""
        return self.seed_for(tag, repetition) % 2**31

    def generator(self, tag: str, repetition: int = 0) -> torch.Generator:
        return seeding.torch_generator(self.seed_for(tag, repetition))

    def rng(self, tag: str, repetition: int = 0) -> np.random.Generator:
        return seeding.numpy_rng(self.seed_for(tag, repetition))


@dataclass(frozen=True)
class Claim:
    """A statement from a paper, tied to a scenario, evaluators and a check.

    ``check(params, ctx) -> Outcome`` runs constructions and evaluators; ``agrees`` in the record is
    ``verdict == source_verdict``. ``expected_failure`` holds the measured reason when the claim
    honestly does not reproduce (the test suite marks it xfail, the report says so), in the modes
    named by ``expected_failure_modes`` (a quick configuration can be too small for an effect
    that the full one shows, or the other way round), or one reason per mode (a dict). ``paper``
    is the source's own budget where it differs from full mode (hours, never run in CI); without
    one, full mode is the source's budget. A ``parallel`` claim spreads its own work over
    ``ctx.execution``; the runner gives it all the workers and runs it alone. ``rule`` is the declared verdict rule (see
    :mod:`catalogue.rules`); a claim without one still returns its own verdict.

    ``kind`` says how the claim can fail: an ``identity`` is exact algebra (only a bug breaks it),
    a ``construction`` exhibits an explicit object with a property, an ``empirical`` claim rests
    on training, sampling or statistics. ``controls`` are its negative controls (:class:`Control`).
    ``seeds`` is the number of independent user seeds its full-mode verdict pools
    (:func:`catalogue.verdicts.across_seeds`); 1 for a claim whose check pools its own draws or
    that is exact.
    """

    id: str
    title: str
    statement: str
    source: Source
    source_verdict: Verdict
    params: type[Spec]
    quick: Spec
    full: Spec
    check: Callable[[Any, ClaimContext], Outcome]
    expected_failure: str | dict[str, str] | None = None
    expected_failure_modes: tuple[str, ...] = ("quick", "full")
    parallel: bool = False
    paper: Spec | None = None
    rule: Rule | None = None
    kind: ClaimKind = "empirical"
    controls: tuple[Control, ...] = ()
    seeds: int = 1

    def control(self, name: str) -> Control:
        """The control called ``name``; KeyError (naming the ones there are) otherwise."""
        for control in self.controls:
            if control.name == name:
                return control
        names = ", ".join(c.name for c in self.controls) or "none"
        raise KeyError(f"{self.id} has no control {name!r} (its controls: {names})")

    def expected_failure_in(self, mode: str) -> str | None:
        """The measured reason the claim does not reproduce in ``mode`` (custom runs count as full)."""
        mode = mode if mode in MODES else "full"
        if isinstance(self.expected_failure, dict):
            return self.expected_failure.get(mode)
        return self.expected_failure if mode in self.expected_failure_modes else None

    @property
    def family(self) -> str:
        return self.id.split(".", 1)[0]

    def spec_for(self, mode: str) -> Spec:
        """The parameters of ``mode``: quick, full, or paper (for a claim that has a paper budget)."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if mode == "paper" and self.paper is None:
            raise ValueError(f"{self.id} has no paper budget (its full mode is the source's budget)")
        return {"quick": self.quick, "full": self.full, "paper": self.paper}[mode]
