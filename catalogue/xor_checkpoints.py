"""Seeded, checkpointed runs of Wen et al.'s XOR training configurations (:mod:`constructions.xor_runs`).

A configuration's random draws come from its own spec hash (so claims that share a configuration
share its runs, cached in-process, and see the same numbers) and the user seed. With a checkpoint
directory, a run saves its state there every few minutes and at the end, and continues from a
saved state of the same run wherever it finds one: a stopped run resumes, a finished one is read
back, with the same numbers bit for bit.
"""

from __future__ import annotations

import functools
import io
import os
import sys
from pathlib import Path
from typing import Literal

import torch

from catalogue import provenance, seeding
from catalogue.atomic import atomic_write_bytes
from catalogue.kernels import PINNED
from catalogue.versions import versions
from constructions.xor import XorData
from constructions.xor_runs import ADDED_FIELDS, TrainConfig, train_runs
from constructions.xor_training import TrainingLog, TrainingState, XorNets

__all__ = ["CHECKPOINT_EVERY", "checkpoint_path", "train"]

CHECKPOINT_EVERY = 300.0  # seconds between checkpoints; the environment's CATALOGUE_CHECKPOINT_EVERY overrides it


def training_seed(cfg: TrainConfig) -> str:
    """The hash a configuration's random draws come from. The evaluator's probes do not touch the
    training, and a field at its default None leaves the hash as it was before the field existed,
    so the runs (data, init, sample order) stay the same whether or not they are logged."""
    data = cfg.model_dump(mode="json", exclude={"hessian_samples"})
    for name, default in ADDED_FIELDS.items():
        if data[name] == default:
            del data[name]
    return seeding.spec_hash(data)


def checkpoint_path(cfg: TrainConfig, method: str, user_seed: int, directory: Path) -> Path:
    """One file per run of a configuration, keyed by everything its numbers depend on: the
    configuration, the method, the user seed, the trainer's code, the library versions and, for
    the steps that run through torch's BLAS and vectorized kernels (GD, Sim-BN's 1-SAM), the CPU
    kernel paths (catalogue.kernels). The compiled rank-one 1-SAM steps are plain IEEE arithmetic
    in a fixed order, and torch's random draws agree between AVX2 and AVX-512 (measured)."""
    content = {
        "config": cfg.model_dump(mode="json"),
        "method": method,
        "user_seed": user_seed,
        "code": provenance.code_files("constructions.xor_training"),
        "versions": versions(),
    }
    if method == "gd" or cfg.arch == "simbn":
        content["kernels"] = {name: os.environ.get(name, "auto") for name in PINNED}
    key = seeding.spec_hash(content)
    return directory / f"xor-{cfg.arch}-{method}-{key[:16]}.pt"


def _load_state(path: Path | None) -> TrainingState | None:
    if path is None or not path.is_file():
        return None
    try:
        return TrainingState.from_dict(torch.load(path, weights_only=True))
    except Exception as exc:  # a torn or foreign file: train from the start rather than trust it
        print(f"warning: ignoring unreadable checkpoint {path}: {exc}", file=sys.stderr)
        return None


def _save_state(path: Path, state: TrainingState) -> None:
    buffer = io.BytesIO()
    torch.save(state.to_dict(), buffer)
    atomic_write_bytes(path, buffer.getvalue())


@functools.lru_cache(maxsize=16)
def train(
    cfg: TrainConfig,
    method: Literal["sam", "gd"],
    user_seed: int,
    checkpoints: Path | None = None,
    progress: bool = False,
) -> tuple[XorNets, TrainingLog, XorData]:
    """Train ``cfg.runs`` nets by ``method`` from the configuration's seeds; returns the nets, the log
    and the data. Do not mutate them. ``checkpoints``: the directory the run's state is kept in."""
    seed = training_seed(cfg)
    generators = {
        tag: seeding.torch_generator(seeding.derive_seed(seed, 0, user_seed, tag))
        for tag in ("xor", "test", "init", f"order-{method}")
    }
    generators["order"] = generators.pop(f"order-{method}")
    path = None if checkpoints is None else checkpoint_path(cfg, method, user_seed, checkpoints)
    return train_runs(
        cfg,
        method,
        generators,
        resume=_load_state(path),
        checkpoint=None if path is None else functools.partial(_save_state, path),
        checkpoint_every=float(os.environ.get("CATALOGUE_CHECKPOINT_EVERY", CHECKPOINT_EVERY)),
        progress=progress,
    )
