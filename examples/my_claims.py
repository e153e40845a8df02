"""A claim that lives outside the catalogue: ``catalogue run --plugin examples/my_claims.py``.

The same decorator, rules, controls and kinds as the built-in claims; its family (``mine``) is
its own. Euler's identity for positively homogeneous nets underlies every rescaling argument in
the catalogue: a bias-free ReLU net with L linear layers has f(αθ_l) = α f(θ) per layer, hence
⟨θ, ∇_θ f(x)⟩ = L f(x). Biases break the homogeneity, which is the negative control.
"""

import torch
from pydantic import PositiveFloat, PositiveInt

from catalogue.claim import ClaimContext, Control, Outcome, Source
from catalogue.registry import register
from catalogue.rules import AtMost, param
from constructions.specs import Spec


class EulerParams(Spec):
    width: PositiveInt = 16
    layers: PositiveInt = 3  # linear layers L
    samples: PositiveInt = 64
    bias: bool = False
    tolerance: PositiveFloat = 1e-10


@register(
    id="mine.euler-homogeneity",
    kind="identity",
    title="A bias-free ReLU net with L linear layers has ⟨θ, ∇_θ f(x)⟩ = L f(x)",
    statement="For a bias-free ReLU MLP with L linear layers, ⟨θ, ∇_θ f(x)⟩ = L f(x) at every input.",
    source=Source(paper="Liang, Poggio, Rakhlin, Stokes 2019", arxiv="1711.01530", locator="structural lemma, §2"),
    source_verdict="holds",
    params=EulerParams,
    rule=AtMost("max_rel_err", param("tolerance"), why="an exact identity: only float64 round-off (≈1e-15) remains"),
    controls=(Control(name="bias", breaks="positive homogeneity", expect="refuted", changes={"bias": True}),),
    quick={"layers": 2},
    full={},
)
def euler_homogeneity(p: EulerParams, ctx: ClaimContext) -> Outcome:
    torch.manual_seed(ctx.int_seed("init"))
    sizes = [5] + [p.width] * (p.layers - 1)
    layers = [
        m for a, b in zip(sizes, sizes[1:], strict=False) for m in (torch.nn.Linear(a, b, bias=p.bias), torch.nn.ReLU())
    ]
    net = torch.nn.Sequential(*layers, torch.nn.Linear(sizes[-1], 1, bias=p.bias)).double()
    x = torch.randn(p.samples, 5, dtype=torch.float64, generator=ctx.generator("x"))
    params = {k: w.detach() for k, w in net.named_parameters()}

    def along_ray(t):  # ⟨θ, ∇_θ f(x_i)⟩ for every sample at once: d/dt f_{(1+t)θ}(x_i) at t = 0
        return torch.func.functional_call(net, {k: (1 + t) * w for k, w in params.items()}, (x,))

    zero, one = torch.zeros((), dtype=torch.float64), torch.ones((), dtype=torch.float64)
    f, euler = torch.func.jvp(along_ray, (zero,), (one,))
    err = (euler - p.layers * f).abs() / (p.layers * f).abs().clamp_min(1e-12)
    return Outcome(evidence={"max_rel_err": float(err.max())})
