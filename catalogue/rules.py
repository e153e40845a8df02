"""Declared verdict rules: a named threshold on a named measured quantity, with its reason.

A claim declares its rule next to its statement (``register(rule=...)``); its check only measures.
The runner applies the rule to the check's evidence and stores one :class:`Check` per threshold,
so the record and the report show each number beside the threshold it met or missed, the
direction that means *holds*, and why the threshold is where it is. The verdict sentence is
written once, here.

Vocabulary (``q`` a dotted path into the evidence; thresholds are numbers, :func:`param` (a field
of the claim's parameters) or :func:`measured` (another evidence quantity)):

- :class:`AtMost` ``q ≤ holds`` (``<`` with ``strict``); refuted above ``refuted`` (default:
  whenever it does not hold), inconclusive in the gap;
- :class:`AtLeast` ``q ≥ holds`` (``>`` with ``strict``), the mirror image;
- :class:`Near` ``|q − target| ≤ tolerance``, else refuted;
- :class:`Between` ``low ≤ q ≤ high``, else refuted;
- :class:`IntervalAbove` a measured interval ``[lo, hi]`` (a confidence interval) wholly at or above
  a cut holds, wholly below refutes, straddling is inconclusive; :class:`IntervalBelow` the mirror;
- :class:`IsTrue` a measured yes/no: true holds, false refutes;
- :class:`AllOf` refuted if any part refutes, holds if every part holds, else inconclusive;
- :class:`Each` a rule applied to every entry of a measured mapping (each population, each power c);
- :class:`Supports` a part that can make the verdict hold but not refute it (failing: inconclusive);
- :class:`Given` a precondition (a rule that must hold) before a test: unmet, the verdict is
  inconclusive whatever the test says ("Lanczos did not converge: no verdict");
- :class:`Counterexample` for a universal statement ("every flattest interpolator generalizes"):
  refuted when the exhibited object has every property of a counterexample, otherwise
  inconclusive (one object that is not a counterexample proves nothing).

A non-finite or non-numeric value (NaN from a diverged run, None) never holds and never refutes:
it is inconclusive. A quantity the evidence does not have is the claim's bug: the run's record
is an error naming it.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

__all__ = [
    "Ref",
    "param",
    "measured",
    "Check",
    "Decision",
    "Rule",
    "AtMost",
    "AtLeast",
    "Near",
    "Between",
    "IntervalAbove",
    "IntervalBelow",
    "IsTrue",
    "AllOf",
    "Each",
    "Supports",
    "Given",
    "Counterexample",
    "lookup",
]

Verdict = Literal["holds", "refuted", "inconclusive"]


@dataclass(frozen=True)
class Ref:
    """A threshold taken from the run: a claim parameter or another measured quantity."""

    source: Literal["params", "evidence"]
    path: str

    def __str__(self) -> str:
        return self.path


def param(path: str) -> Ref:
    """The claim's parameter ``path`` (dotted for nested specs), read when the rule is applied."""
    return Ref("params", path)


def measured(path: str) -> Ref:
    """The measured quantity ``path`` of the same evidence (e.g. a rank bound computed by the run)."""
    return Ref("evidence", path)


Threshold = float | int | Ref

_MISSING = object()


def lookup(data: Any, path: str) -> Any:
    """``data[a][b]...`` for ``path = "a.b..."`` through dicts, lists (integer parts) and models.

    Raises:
        KeyError: the path names nothing (a rule that names a quantity the check does not measure
            is a bug in the claim, not an inconclusive run).
    """
    value = data
    for part in path.split("."):
        if isinstance(value, BaseModel):
            value = getattr(value, part, _MISSING)
        elif isinstance(value, Mapping):
            value = value.get(part, _MISSING)
        elif isinstance(value, list | tuple) and part.lstrip("-").isdigit():
            value = value[int(part)] if -len(value) <= int(part) < len(value) else _MISSING
        else:
            value = _MISSING
        if value is _MISSING:
            raise KeyError(f"rule quantity {path!r}: {part!r} is not in the claim's results")
    return value


def _number(value: Any) -> float | None:
    """A finite float, or None for anything a threshold cannot be compared with."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int | float):
        return f"{value:.4g}"
    return str(value)


def _require_why(rule: Any) -> None:
    if not str(getattr(rule, "why", "")).strip():
        raise ValueError(f"rule on {rule.quantity!r}: a threshold needs its why")


class Check(BaseModel):
    """One threshold applied: what was compared, the outcome, and why the threshold is there."""

    rule: str
    quantity: str
    value: Any
    threshold: Any
    verdict: Verdict
    why: str
    role: Literal["test", "requires", "witness"] = "test"


@dataclass(frozen=True)
class Decision:
    """A rule's verdict and the checks behind it, in the order the rule lists them."""

    verdict: Verdict
    checks: list[Check] = field(default_factory=list)


def combine(verdicts: list[str]) -> Verdict:
    """refuted if any part is refuted, holds if every part holds (and there is one), else inconclusive."""
    if not verdicts:
        raise ValueError("a rule with no parts decides nothing")
    if "refuted" in verdicts:
        return "refuted"
    return "holds" if all(v == "holds" for v in verdicts) else "inconclusive"


class Rule(ABC):
    """A verdict rule; ``decide(evidence, params)`` applies it."""

    @abstractmethod
    def decide(self, evidence: Mapping[str, Any], params: Any = None) -> Decision: ...

    @abstractmethod
    def describe(self) -> str:
        """The rule in words, thresholds named as declared (for the report and ``catalogue show``)."""

    def reads(self, evidence: Mapping[str, Any] | None = None) -> list[str]:
        """The evidence paths the rule reads: its quantity and every :func:`measured` threshold
        (:class:`Each` needs ``evidence`` to name its entries' paths)."""
        quantity = getattr(self, "quantity", None)
        refs = [v.path for v in vars(self).values() if isinstance(v, Ref) and v.source == "evidence"]
        return ([quantity] if isinstance(quantity, str) else []) + refs

    def _resolve(self, threshold: Threshold, evidence: Mapping[str, Any], params: Any) -> Any:
        if not isinstance(threshold, Ref):
            return threshold
        if threshold.source == "params":
            if params is None:
                raise KeyError(f"threshold {threshold.path!r} names a parameter, but no parameters were given")
            return lookup(params, threshold.path)
        return lookup(evidence, threshold.path)


def _named(threshold: Threshold, value: Any) -> str:
    """``tolerance (1e-10)`` for a named threshold, ``1e-10`` for a literal one."""
    return f"{threshold} ({_fmt(value)})" if isinstance(threshold, Ref) else _fmt(value)


@dataclass(frozen=True)
class _Compare(Rule):
    quantity: str
    holds: Threshold
    refuted: Threshold | None = None
    why: str = ""
    strict: bool = False

    op: str = field(default="", init=False)

    def __post_init__(self) -> None:
        _require_why(self)

    @abstractmethod
    def _verdict(self, value: float, holds: float, refuted: float | None) -> Verdict: ...

    @property
    def symbol(self) -> str:
        return {"≤": "<", "≥": ">"}[self.op] if self.strict else self.op

    def describe(self) -> str:
        text = f"{self.quantity} {self.symbol} {self.holds}"
        if self.refuted is not None:
            text += f" (refuted {'above' if self.op == '≤' else 'below'} {self.refuted})"
        return text

    def decide(self, evidence: Mapping[str, Any], params: Any = None) -> Decision:
        raw = lookup(evidence, self.quantity)
        holds = self._resolve(self.holds, evidence, params)
        refuted = None if self.refuted is None else self._resolve(self.refuted, evidence, params)
        value, h = _number(raw), _number(holds)
        r = None if refuted is None else _number(refuted)
        if h is None or (refuted is not None and r is None):
            raise ValueError(f"rule on {self.quantity!r}: threshold {holds!r}/{refuted!r} is not a finite number")
        verdict = "inconclusive" if value is None else self._verdict(value, h, r)
        text = f"{self.quantity} {self.symbol} {_named(self.holds, holds)}"
        if refuted is not None:
            text += f" (refuted {'above' if self.op == '≤' else 'below'} {_named(self.refuted, refuted)})"
        threshold = holds if refuted is None else {"holds": holds, "refuted": refuted}
        return Decision(
            verdict,
            [Check(rule=text, quantity=self.quantity, value=raw, threshold=threshold, verdict=verdict, why=self.why)],
        )


@dataclass(frozen=True)
class AtMost(_Compare):
    """Holds if ``quantity ≤ holds`` (``<`` if ``strict``); refuted above ``max(refuted, holds)``,
    inconclusive in between; without ``refuted``, refuted whenever it does not hold."""

    op: str = field(default="≤", init=False)

    def _verdict(self, value: float, holds: float, refuted: float | None) -> Verdict:
        if value < holds or (value == holds and not self.strict):
            return "holds"
        if refuted is None:
            return "refuted"
        return "refuted" if value > max(refuted, holds) else "inconclusive"


@dataclass(frozen=True)
class AtLeast(_Compare):
    """Holds if ``quantity ≥ holds`` (``>`` if ``strict``); refuted below ``min(refuted, holds)``,
    inconclusive in between; without ``refuted``, refuted whenever it does not hold."""

    op: str = field(default="≥", init=False)

    def _verdict(self, value: float, holds: float, refuted: float | None) -> Verdict:
        if value > holds or (value == holds and not self.strict):
            return "holds"
        if refuted is None:
            return "refuted"
        return "refuted" if value < min(refuted, holds) else "inconclusive"


def _difference(quantity: str, target: Threshold, shown: str) -> str:
    """``q − t``, written ``q + 2`` for a literal negative target."""
    if isinstance(target, int | float) and target < 0:
        return f"{quantity} + {_fmt(-target)}"
    return f"{quantity} − {shown}"


class _TwoSided(Rule):
    """A rule that either passes (holds) or fails (refuted) on one number and resolved thresholds."""

    quantity: str
    why: str

    def _two_sided(
        self,
        evidence: Mapping[str, Any],
        params: Any,
        named: dict[str, Threshold],
        passes: Callable[[float, dict[str, float]], bool],
        text: Callable[[dict[str, float]], str],
    ) -> Decision:
        """Holds if ``passes(value, thresholds)``, refuted otherwise, inconclusive without a number."""
        raw = lookup(evidence, self.quantity)
        resolved = {name: _number(self._resolve(t, evidence, params)) for name, t in named.items()}
        if any(v is None for v in resolved.values()):
            raise ValueError(f"rule on {self.quantity!r}: {' and '.join(named)} must be finite numbers")
        value = _number(raw)
        verdict: Verdict = "inconclusive" if value is None else ("holds" if passes(value, resolved) else "refuted")
        check = Check(
            rule=text(resolved), quantity=self.quantity, value=raw, threshold=resolved, verdict=verdict, why=self.why
        )
        return Decision(verdict, [check])


@dataclass(frozen=True)
class Near(_TwoSided):
    """Holds if ``|quantity − target| ≤ tolerance``, refuted otherwise."""

    quantity: str
    target: Threshold
    tolerance: Threshold
    why: str

    def __post_init__(self) -> None:
        _require_why(self)

    def describe(self) -> str:
        return f"|{_difference(self.quantity, self.target, str(self.target))}| ≤ {self.tolerance}"

    def decide(self, evidence: Mapping[str, Any], params: Any = None) -> Decision:
        def text(t: dict[str, float]) -> str:
            shown = _difference(self.quantity, self.target, _named(self.target, t["target"]))
            return f"|{shown}| ≤ {_named(self.tolerance, t['tolerance'])}"

        return self._two_sided(
            evidence,
            params,
            {"target": self.target, "tolerance": self.tolerance},
            lambda v, t: abs(v - t["target"]) <= t["tolerance"],
            text,
        )


@dataclass(frozen=True)
class Between(_TwoSided):
    """Holds if ``low ≤ quantity ≤ high``, refuted otherwise."""

    quantity: str
    low: Threshold
    high: Threshold
    why: str

    def __post_init__(self) -> None:
        _require_why(self)

    def describe(self) -> str:
        return f"{self.low} ≤ {self.quantity} ≤ {self.high}"

    def decide(self, evidence: Mapping[str, Any], params: Any = None) -> Decision:
        return self._two_sided(
            evidence,
            params,
            {"low": self.low, "high": self.high},
            lambda v, t: t["low"] <= v <= t["high"],
            lambda t: f"{_named(self.low, t['low'])} ≤ {self.quantity} ≤ {_named(self.high, t['high'])}",
        )


def _interval(raw: Any) -> tuple[float, float] | None:
    """``(lo, hi)`` from a measured pair of finite numbers with lo ≤ hi, None otherwise."""
    if not isinstance(raw, list | tuple) or len(raw) != 2:
        return None
    lo, hi = _number(raw[0]), _number(raw[1])
    return None if lo is None or hi is None or lo > hi else (lo, hi)


@dataclass(frozen=True)
class _Interval(Rule):
    quantity: str
    cut: Threshold
    why: str
    strict: bool = False

    op: str = field(default="", init=False)

    def __post_init__(self) -> None:
        _require_why(self)

    @abstractmethod
    def _verdict(self, lo: float, hi: float, cut: float) -> Verdict: ...

    def _text(self, shown: str) -> str:
        op = {"≥": ">", "≤": "<"}[self.op] if self.strict else self.op
        other = "below" if self.op == "≥" else "above"
        return f"{self.quantity} wholly {op} {shown} (refuted wholly {other})"

    def describe(self) -> str:
        return self._text(str(self.cut))

    def decide(self, evidence: Mapping[str, Any], params: Any = None) -> Decision:
        raw = lookup(evidence, self.quantity)
        cut = _number(self._resolve(self.cut, evidence, params))
        if cut is None:
            raise ValueError(f"rule on {self.quantity!r}: the cut {self.cut} is not a finite number")
        interval = _interval(raw)
        verdict: Verdict = "inconclusive" if interval is None else self._verdict(*interval, cut)
        check = Check(
            rule=self._text(_named(self.cut, cut)),
            quantity=self.quantity,
            value=raw,
            threshold=cut,
            verdict=verdict,
            why=self.why,
        )
        return Decision(verdict, [check])


@dataclass(frozen=True)
class IntervalAbove(_Interval):
    """An interval ``[lo, hi]`` (a confidence interval) against a cut: holds if ``lo ≥ cut`` (``>``
    with ``strict``), refuted if ``hi < cut``, inconclusive when it straddles the cut or is not a
    pair of finite numbers."""

    op: str = field(default="≥", init=False)

    def _verdict(self, lo: float, hi: float, cut: float) -> Verdict:
        if lo > cut or (lo == cut and not self.strict):
            return "holds"
        return "refuted" if hi < cut else "inconclusive"


@dataclass(frozen=True)
class IntervalBelow(_Interval):
    """The mirror of :class:`IntervalAbove`: holds if ``hi ≤ cut`` (``<`` with ``strict``), refuted
    if ``lo > cut``, otherwise inconclusive."""

    op: str = field(default="≤", init=False)

    def _verdict(self, lo: float, hi: float, cut: float) -> Verdict:
        if hi < cut or (hi == cut and not self.strict):
            return "holds"
        return "refuted" if lo > cut else "inconclusive"


@dataclass(frozen=True)
class IsTrue(Rule):
    """A measured yes/no: ``True`` holds, ``False`` refutes, anything else is inconclusive."""

    quantity: str
    why: str

    def __post_init__(self) -> None:
        _require_why(self)

    def describe(self) -> str:
        return f"{self.quantity} is true"

    def decide(self, evidence: Mapping[str, Any], params: Any = None) -> Decision:
        raw = lookup(evidence, self.quantity)
        verdict: Verdict = "holds" if raw is True else ("refuted" if raw is False else "inconclusive")
        return Decision(
            verdict,
            [
                Check(
                    rule=self.describe(),
                    quantity=self.quantity,
                    value=raw,
                    threshold=True,
                    verdict=verdict,
                    why=self.why,
                )
            ],
        )


class AllOf(Rule):
    """Every part must hold; one refuted part refutes."""

    def __init__(self, *parts: Rule) -> None:
        if not parts:
            raise ValueError("AllOf needs at least one rule")
        self.parts = parts

    def describe(self) -> str:
        return " and ".join(f"({p.describe()})" if isinstance(p, AllOf | Given) else p.describe() for p in self.parts)

    def reads(self, evidence: Mapping[str, Any] | None = None) -> list[str]:
        return [path for part in self.parts for path in part.reads(evidence)]

    def decide(self, evidence: Mapping[str, Any], params: Any = None) -> Decision:
        decisions = [p.decide(evidence, params) for p in self.parts]
        return Decision(combine([d.verdict for d in decisions]), [c for d in decisions for c in d.checks])


@dataclass(frozen=True)
class Given(Rule):
    """``then`` decides only when ``requires`` holds; otherwise the run decides nothing (inconclusive)."""

    requires: Rule
    then: Rule

    def describe(self) -> str:
        return f"given {self.requires.describe()}: {self.then.describe()}"

    def reads(self, evidence: Mapping[str, Any] | None = None) -> list[str]:
        return self.requires.reads(evidence) + self.then.reads(evidence)

    def decide(self, evidence: Mapping[str, Any], params: Any = None) -> Decision:
        pre = self.requires.decide(evidence, params)
        test = self.then.decide(evidence, params)
        checks = [c.model_copy(update={"role": "requires"}) for c in pre.checks] + test.checks
        return Decision(test.verdict if pre.verdict == "holds" else "inconclusive", checks)


@dataclass(frozen=True)
class Counterexample(Rule):
    """Refutes a universal statement when ``witness`` holds (the exhibited object is a
    counterexample: every property it needs is met); otherwise inconclusive."""

    witness: Rule
    why: str

    def __post_init__(self) -> None:
        if not self.why.strip():
            raise ValueError("a counterexample rule needs its why")

    def describe(self) -> str:
        return f"refuted by a counterexample: {self.witness.describe()}"

    def reads(self, evidence: Mapping[str, Any] | None = None) -> list[str]:
        return self.witness.reads(evidence)

    def decide(self, evidence: Mapping[str, Any], params: Any = None) -> Decision:
        found = self.witness.decide(evidence, params)
        checks = [c.model_copy(update={"role": "witness"}) for c in found.checks]
        return Decision("refuted" if found.verdict == "holds" else "inconclusive", checks)


@dataclass(frozen=True)
class Each(Rule):
    """``rule`` applied to every entry of the measured mapping at ``path`` (each population, each
    power c), its quantities read inside the entry: refuted if an entry refutes, holds if every
    entry holds; an empty mapping decides nothing (inconclusive). Checks are named
    ``path.<key>.<quantity>``."""

    path: str
    rule: Rule

    def describe(self) -> str:
        return f"for each entry of {self.path}: {self.rule.describe()}"

    def _entries(self, evidence: Mapping[str, Any]) -> Mapping[str, Any]:
        entries = lookup(evidence, self.path)
        if not isinstance(entries, Mapping):
            raise ValueError(f"rule on {self.path!r}: each needs a mapping, the results have {type(entries).__name__}")
        return entries

    def reads(self, evidence: Mapping[str, Any] | None = None) -> list[str]:
        if evidence is None:
            return [self.path]
        return [
            f"{self.path}.{key}.{path}"
            for key, entry in self._entries(evidence).items()
            for path in self.rule.reads(entry)
        ]

    def decide(self, evidence: Mapping[str, Any], params: Any = None) -> Decision:
        entries = self._entries(evidence)
        if not entries:
            empty = Check(
                rule=self.describe(),
                quantity=self.path,
                value={},
                threshold=None,
                verdict="inconclusive",
                why="nothing was measured to apply the rule to: no verdict",
            )
            return Decision("inconclusive", [empty])
        verdicts, checks = [], []
        for key, entry in entries.items():
            decision = self.rule.decide(entry, params)
            verdicts.append(decision.verdict)
            for c in decision.checks:
                name = f"{self.path}.{key}.{c.quantity}"
                checks.append(c.model_copy(update={"quantity": name, "rule": c.rule.replace(c.quantity, name, 1)}))
        return Decision(combine(verdicts), checks)


@dataclass(frozen=True)
class Supports(Rule):
    """A part that can make the verdict hold but not refute it: where ``rule`` refutes, the part is
    inconclusive (a correlation not shown to be weak is not yet shown to be strong)."""

    rule: Rule

    def describe(self) -> str:
        return f"{self.rule.describe()} (supports; failing it decides nothing)"

    def reads(self, evidence: Mapping[str, Any] | None = None) -> list[str]:
        return self.rule.reads(evidence)

    def decide(self, evidence: Mapping[str, Any], params: Any = None) -> Decision:
        found = self.rule.decide(evidence, params)
        weaken = {"refuted": "inconclusive"}
        checks = [c.model_copy(update={"verdict": weaken.get(c.verdict, c.verdict)}) for c in found.checks]
        return Decision(weaken.get(found.verdict, found.verdict), checks)
