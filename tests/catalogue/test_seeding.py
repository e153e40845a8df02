from catalogue import seeding
from constructions.specs import BNLinearRegressionSpec


def test_spec_hash_is_canonical():
    a = BNLinearRegressionSpec(n=5, d=7)
    b = BNLinearRegressionSpec.model_validate({"d": 7, "n": 5})
    assert seeding.spec_hash(a) == seeding.spec_hash(b)
    assert seeding.spec_hash(a) != seeding.spec_hash(BNLinearRegressionSpec(n=6, d=7))


def test_derived_seeds_differ_by_every_input():
    base = seeding.derive_seed("abc", 0, 0, "x")
    assert base == seeding.derive_seed("abc", 0, 0, "x")
    others = {
        seeding.derive_seed("abd", 0, 0, "x"),
        seeding.derive_seed("abc", 1, 0, "x"),
        seeding.derive_seed("abc", 0, 1, "x"),
        seeding.derive_seed("abc", 0, 0, "y"),
    }
    assert base not in others and len(others) == 4
    assert 0 <= base < 2**63
