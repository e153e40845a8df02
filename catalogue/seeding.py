"""The one place randomness is seeded: spec hashes and seeds derived from them.

Every random draw of a run comes from ``derive_seed(spec_hash, repetition, user_seed, tag)``, so
the same spec (and seed) gives the same numbers, and two parts of one run never share a stream.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import torch
from pydantic import BaseModel

__all__ = ["canonical_json", "spec_hash", "derive_seed", "numpy_rng", "torch_generator"]


def canonical_json(spec: BaseModel | dict) -> str:
    """Sorted-key, compact JSON of a spec: equal specs give byte-identical strings."""
    data = spec.model_dump(mode="json") if isinstance(spec, BaseModel) else spec
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def spec_hash(spec: BaseModel | dict) -> str:
    """sha256 of the canonical JSON, hex."""
    return hashlib.sha256(canonical_json(spec).encode()).hexdigest()


def derive_seed(spec_digest: str, repetition: int = 0, user_seed: int = 0, tag: str = "") -> int:
    """A 63-bit seed from (spec hash, repetition, user seed, tag), stable across platforms."""
    key = f"{spec_digest}|{repetition}|{user_seed}|{tag}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "little") & ((1 << 63) - 1)


def numpy_rng(seed: int) -> np.random.Generator:
    """A numpy Generator (PCG64) for a derived seed."""
    return np.random.default_rng(seed)


def torch_generator(seed: int) -> torch.Generator:
    """A CPU torch Generator for a derived seed."""
    return torch.Generator().manual_seed(seed)
