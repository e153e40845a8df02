import torch

from constructions.digits import build_digits
from constructions.specs import DigitsSpec


def test_split_and_label_noise(gen):
    p = build_digits(DigitsSpec(n_train=100, n_test=50, hidden=(8,), label_noise=0.5), gen)
    assert p.data.x.shape == (100, 64) and p.data.x_test.shape == (50, 64)
    assert p.data.x.max() <= 1 and p.data.x.min() >= 0
    assert torch.equal(p.data.y.argmax(1), p.labels)
    assert 30 <= p.corrupted <= 50  # half redrawn uniformly: about 9/10 of them change


def test_same_generator_seed_same_split():
    a = build_digits(DigitsSpec(n_train=20, n_test=10), torch.Generator().manual_seed(3))
    b = build_digits(DigitsSpec(n_train=20, n_test=10), torch.Generator().manual_seed(3))
    assert torch.equal(a.data.x, b.data.x) and torch.equal(a.labels, b.labels)
