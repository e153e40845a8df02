"""The set of flattest interpolators of the no-bias two-layer ReLU net on XOR, searched exactly.

For ``f(x) = Σ_j a_j relu(θ_jᵀx)`` on the cube with ``y = x1·x2`` every interpolator has
``Υ ≥ (4/n) Σ_i ‖x_i‖|y_i| = 4√d`` (docs/derivations.md §9: ``λ_i = ‖x_i‖ sign y_i`` is dual
feasible), and the width-4 net with rows ``(a e1 + b e2)/2`` and outputs ``ab`` attains it and
computes ``x1·x2`` on the whole cube. Complementary slackness says which interpolators attain it:
exactly those built from *flat* neurons, whose ratio ``r_λ(θ̂) = 1``. On the cube ``‖x_i‖ = √d``, so
``r_λ(θ̂) = Σ_S y_i z_i / (√|S| ‖z_S‖)`` with ``z_i = θ̂ᵀx_i`` and S the active samples, and
Cauchy–Schwarz makes it 1 iff

    S is label-pure (one sign σ of y),  z_i = c > 0 for every i ∈ S,  z_j ≤ 0 for every j ∉ S,

with the neuron's output weight of sign σ. Scaled to ``c = 1``, a flat neuron is a point of the
polyhedron ``P_S = {θ : X_S θ = 1, X_{S^c} θ ≤ 0}``. Any nonnegative combination of flat neurons
that fits the data is a flattest interpolator (its Υ is ``(4/n) Σ_i λ_i y_i = 4√d``). So the
flattest set is the width-4 net alone when (i) each canonical neuron's ``P_{S_c}`` is the single
point ``θ_c`` and (ii) no other label-pure S has a nonempty ``P_S``. Both are decided exactly:
(i) by 2d linear programs (the largest and smallest of each coordinate of ``θ − θ_c`` over
``P_{S_c}``), with the recession cone ``{v : X_S v = 0, X_{S^c} v ≤ 0}`` telling whether a moved
neuron can go arbitrarily far; (ii) by a mixed-integer program over θ and the active set, with a
no-good cut for each canonical set, within the box ``‖θ‖∞ ≤ box`` (the limit of the certificate).

Derived here (the characterization is §9's complementary slackness on the cube); Wen, Li, Ma 2023,
Thm 3.1 bounds the population MSE of every flattest interpolator by Õ(d/n) once n = Ω(d log d).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

__all__ = [
    "FlatNeuron",
    "FlattestSet",
    "canonical_flat_neurons",
    "canonical_move",
    "cube_population_mse",
    "cover_member",
    "flat_upsilon",
    "flattest_set",
    "moved_member",
    "other_flat_neurons",
    "usable_cover",
]

_ZERO = 1e-9  # an LP optimum below this is 0: HiGHS's feasibility tolerance is 1e-7 on rows of norm √d


@dataclass(frozen=True)
class FlatNeuron:
    """A flat neuron scaled to ``θᵀx_i = 1`` on its active samples; ``sign`` is its output's sign."""

    theta: np.ndarray
    sign: float

    def active(self, x: np.ndarray) -> np.ndarray:
        return x @ self.theta > 0.5  # 1 on the active set, ≤ 0 elsewhere (up to the solver's tolerance)


@dataclass(frozen=True)
class FlattestSet:
    """What the search found on one training set.

    Attributes:
        unbounded: per canonical neuron, whether it can move arbitrarily far (a nonzero recession direction).
        moves: per canonical neuron, the largest move ``θ − θ_c`` found in ``P_{S_c}`` (0 when rigid).
        others: flat neurons on non-canonical active sets (at most ``limit``).
        enumerated: whether the mixed-integer search proved there are no more (not out of nodes,
            not stopped at ``limit``).
        cover: output weights over the canonical neurons then ``others`` of a flattest interpolator
            that uses ``others`` as much as it can (``None`` when none can be used).
    """

    unbounded: list[bool]
    moves: list[np.ndarray]
    others: list[FlatNeuron] = field(default_factory=list)
    enumerated: bool = True
    cover: np.ndarray | None = None

    @property
    def rigid(self) -> list[bool]:
        """Per canonical neuron, whether ``P_{S_c}`` is the single point θ_c (no move found)."""
        return [not np.any(m) for m in self.moves]

    @property
    def unique(self) -> bool:
        """The width-4 net is the only flattest interpolator (within the box): its neurons cannot
        move, and every other flat neuron is known and unusable in an interpolator."""
        return all(self.rigid) and self.enumerated and self.cover is None


def canonical_flat_neurons(d: int) -> list[FlatNeuron]:
    """The width-4 net's neurons ``(a e1 + b e2)/2`` (value 1 on their quadrant), output sign ``ab``."""
    out = []
    for a in (1.0, -1.0):
        for b in (1.0, -1.0):
            theta = np.zeros(d)
            theta[:2] = a / 2, b / 2
            out.append(FlatNeuron(theta, a * b))
    return out


def canonical_move(x: np.ndarray, neuron: FlatNeuron, box: float) -> tuple[np.ndarray, bool]:
    """The largest single-coordinate move ``v`` with ``θ_c + v ∈ P_{S_c}`` and ``‖θ_c + v‖∞ ≤ box``
    (2d linear programs), and whether the recession cone of ``P_{S_c}`` is nonzero."""
    active = neuron.active(x)
    a_eq, a_ub = x[active], x[~active]
    b_ub = -(a_ub @ neuron.theta)  # X_{S^c}(θ_c + v) ≤ 0
    d = x.shape[1]
    bounds = [(-box - t, box - t) for t in neuron.theta]
    best, best_size = np.zeros(d), 0.0
    for k in range(d):
        for direction in (1.0, -1.0):
            c = np.zeros(d)
            c[k] = -direction
            res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=np.zeros(len(a_eq)), bounds=bounds, method="highs")
            if res.status == 0 and -res.fun > best_size + _ZERO:
                best, best_size = res.x, -res.fun
    # the recession cone: any v ≠ 0 with X_S v = 0, X_{S^c} v ≤ 0 (the most slack within the unit box)
    cone = linprog(
        a_ub.sum(axis=0), A_ub=a_ub, b_ub=np.zeros(len(a_ub)), A_eq=a_eq, b_eq=np.zeros(len(a_eq)), bounds=[(-1, 1)] * d
    )
    unbounded = (-cone.fun > _ZERO) or np.linalg.matrix_rank(x) < d
    return (best if best_size > _ZERO else np.zeros(d)), bool(unbounded)


def other_flat_neurons(
    x: np.ndarray, y: np.ndarray, box: float, limit: int, node_limit: int
) -> tuple[list[FlatNeuron], bool]:
    """Flat neurons on label-pure active sets other than the four quadrants, by a mixed-integer
    program per label sign σ (variables θ and the active indicators s_i of the σ-samples):

        θᵀx_i ≤ 1,  θᵀx_i ≤ M s_i,  θᵀx_i ≥ 1 − M(1 − s_i)   (σ-samples: 1 if active, ≤ 0 if not),
        θᵀx_j ≤ 0 (the other samples),  Σ s_i ≥ 1,  no-good cuts on the quadrant sets and on each
        set found,  ‖θ‖∞ ≤ box,  M = box·max‖x_i‖₁ + 1.

    Returns up to ``limit`` neurons, and whether they are all there are: every program finished
    within ``node_limit`` branch-and-bound nodes (a count, not seconds, so the result does not
    depend on the machine's load) and the last one of each sign was infeasible.
    """
    d = x.shape[1]
    found: list[FlatNeuron] = []
    enumerated = True
    for sign in (1.0, -1.0):
        group, other = np.flatnonzero(y == sign), np.flatnonzero(y != sign)
        k = len(group)
        if k == 0:
            continue
        big = box * float(np.abs(x).sum(axis=1).max()) + 1
        xg = x[group]
        base = [
            (np.hstack([xg, np.zeros((k, k))]), -np.inf, 1.0),
            (np.hstack([xg, -big * np.eye(k)]), 1 - big, 0.0),
            (np.hstack([x[other], np.zeros((len(other), k))]), -np.inf, 0.0),
            (np.hstack([np.zeros(d), np.ones(k)])[None], 1.0, np.inf),
        ]
        quadrants = [n.active(x)[group] for n in canonical_flat_neurons(d) if n.sign == sign]
        while True:
            if len(found) >= limit:
                enumerated = False
                break
            cuts = quadrants + [n.active(x)[group] for n in found if n.sign == sign]
            rows = base + [  # Σ_{i∈T}(1 − s_i) + Σ_{i∉T} s_i ≥ 1: not exactly the set T
                (np.hstack([np.zeros(d), np.where(taken, -1.0, 1.0)])[None], 1.0 - taken.sum(), np.inf)
                for taken in cuts
            ]
            matrix = np.vstack([r[0] for r in rows])
            lower = np.concatenate([np.broadcast_to(r[1], len(r[0])) for r in rows])
            upper = np.concatenate([np.broadcast_to(r[2], len(r[0])) for r in rows])
            res = milp(
                np.zeros(d + k),
                constraints=LinearConstraint(matrix, lower, upper),
                integrality=np.r_[np.zeros(d), np.ones(k)],
                bounds=Bounds(np.r_[np.full(d, -box), np.zeros(k)], np.r_[np.full(d, box), np.ones(k)]),
                options={"node_limit": node_limit},
            )
            if res.status == 2:  # infeasible: no further flat neuron of this sign
                break
            if res.status != 0:  # out of nodes: nothing certified
                enumerated = False
                break
            found.append(FlatNeuron(res.x[:d], sign))
    return found, enumerated


def usable_cover(x: np.ndarray, y: np.ndarray, neurons: list[FlatNeuron], first_other: int) -> np.ndarray | None:
    """Weights u ≥ 0 with ``Σ_j u_j relu(θ_jᵀx_i) = |y_i|`` for every sample (an interpolator made of
    flat neurons, each signed, hence flattest) that maximize the weight on ``neurons[first_other:]``;
    ``None`` when that maximum is 0 (those neurons are in no flattest interpolator)."""
    if len(neurons) <= first_other:
        return None
    act = np.stack([np.where(n.active(x) & (np.sign(y) == n.sign), 1.0, 0.0) for n in neurons], axis=1)
    c = -np.r_[np.zeros(first_other), np.ones(len(neurons) - first_other)]
    res = linprog(c, A_eq=act, b_eq=np.abs(y), bounds=[(0, None)] * len(neurons), method="highs")
    if res.status == 3:  # unbounded: a combination of other neurons alone is zero on the data
        res = linprog(c, A_eq=act, b_eq=np.abs(y), bounds=[(0, 1e3)] * len(neurons), method="highs")
    if res.status != 0 or -res.fun <= _ZERO:
        return None
    return res.x


def flattest_set(x: np.ndarray, y: np.ndarray, *, box: float, limit: int, node_limit: int) -> FlattestSet:
    """Search the flattest interpolators of the training set (see the module docstring)."""
    moves, unbounded = zip(*(canonical_move(x, n, box) for n in canonical_flat_neurons(x.shape[1])), strict=True)
    others, enumerated = other_flat_neurons(x, y, box, limit, node_limit)
    canonical = canonical_flat_neurons(x.shape[1])
    return FlattestSet(
        unbounded=list(unbounded),
        moves=list(moves),
        others=others,
        enumerated=enumerated,
        cover=usable_cover(x, y, canonical + others, len(canonical)),
    )


def moved_member(d: int, found: FlattestSet) -> tuple[np.ndarray, np.ndarray]:
    """A flattest interpolator other than the width-4 net where a canonical neuron can move: the
    width-4 net with every movable neuron at its largest move (rows θ, outputs a)."""
    neurons = canonical_flat_neurons(d)
    theta = np.stack([n.theta + m for n, m in zip(neurons, found.moves, strict=True)])
    return theta, np.array([n.sign for n in neurons])


def cover_member(d: int, found: FlattestSet) -> tuple[np.ndarray, np.ndarray]:
    """The flattest interpolator of ``found.cover`` (rows θ, signed outputs a)."""
    neurons = canonical_flat_neurons(d) + found.others
    return np.stack([n.theta for n in neurons]), np.array([n.sign for n in neurons]) * found.cover


def flat_upsilon(theta: np.ndarray, a: np.ndarray, x: np.ndarray, tol: float = 1e-7) -> float:
    """Υ = (4/n) Σ_j κ(θ̂_j)|u_j| (docs/derivations.md §9) with a sample active when ``θ̂ᵀx_i > tol``:
    the programs' solutions meet ``θᵀx_i ≤ 0`` to their tolerance only, and a sample at +1e-12
    would count as active in the exact formula (a kink: ReLU′(0) = 0)."""
    norms = np.linalg.norm(theta, axis=1)
    z = x @ (theta / norms[:, None]).T
    act = np.where(z > tol, z, 0.0)
    kappa = np.sqrt((act**2).sum(axis=0) * ((z > tol) * (x**2).sum(axis=1)[:, None]).sum(axis=0))
    return float(4 / len(x) * (kappa * np.abs(a) * norms).sum())


def cube_population_mse(
    theta: np.ndarray, a: np.ndarray, samples: int, rng: np.random.Generator
) -> tuple[float, float]:
    """``E_x (f(x) − x1·x2)²`` over x uniform on the cube, by Monte Carlo: (mean, standard error)."""
    x = rng.choice([-1.0, 1.0], size=(samples, theta.shape[1]))
    err = (np.maximum(x @ theta.T, 0.0) @ a - x[:, 0] * x[:, 1]) ** 2
    return float(err.mean()), float(err.std(ddof=1) / np.sqrt(samples))
