"""Hypercube XOR data and the explicit two-layer constructions."""

import pytest
import torch

from constructions.specs import XorSpec
from constructions.xor import (
    bias_generalizer,
    bias_memorizer,
    build_xor,
    nobias_width4,
    simln_generalizer,
    simln_memorizer,
)


def test_distinct_points_and_labels(gen):
    data = build_xor(XorSpec(d=6, n=60), gen)
    assert len({tuple(r) for r in data.x.tolist()}) == 60
    assert torch.equal(data.y, data.x[:, 0] * data.x[:, 1])
    with pytest.raises(ValueError, match="exceeds"):
        build_xor(XorSpec(d=3, n=9), gen)


def test_constructions_interpolate_and_memorizers_vanish_off_the_training_set(gen):
    data = build_xor(XorSpec(d=8, n=30), gen)
    x_all, y_all, _ = data.support()
    train = {tuple(r) for r in data.x.tolist()}
    off = torch.tensor([tuple(r) not in train for r in x_all.tolist()])
    with torch.no_grad():
        for net in (bias_memorizer(data), simln_memorizer(data)):
            assert torch.allclose(net(data.x), data.y, atol=1e-12)
            assert net(x_all[off]).abs().max() == 0
        for net in (bias_generalizer(8), nobias_width4(8), simln_generalizer(8)):
            assert torch.allclose(net(x_all), y_all, atol=1e-12)
