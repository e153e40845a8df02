"""A long training run killed mid-way continues from its checkpoint to the same numbers.

The claim runs in a subprocess through the command line; once it has written a checkpoint it gets
SIGKILL (no cleanup of any kind), then ``catalogue run --resume`` finishes it. Its record must equal,
number for number, the record of the same run done in one go.
"""

import json
import os
import signal
import subprocess
import sys
import time

import torch

from catalogue import cli, store
from catalogue.verify import compare_records

CLAIM = "wen2023.sam-nobias-generalizes"
SPEC = {
    "claim": CLAIM,
    "params": {
        "train": {
            "arch": "nobias",
            "scenario": {"d": 10, "n": 40},
            "width": 32,
            "runs": 2,
            "sam_epochs": 6000,
            "gd_steps": 3000,
            "log_points": 12,
            "hessian_samples": 8,
        }
    },
}


def _run(argv, **kw):
    return subprocess.Popen(
        [sys.executable, "-m", "catalogue.cli", *argv],
        env={**os.environ, "CATALOGUE_CHECKPOINT_EVERY": "0.05"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        **kw,
    )


def test_killed_run_resumes_to_the_same_record(tmp_path, capsys):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    proc = _run(["run", "--spec", str(spec), "--out", str(killed), "--no-progress"])
    deadline = time.monotonic() + 120
    while not list((killed / "checkpoints").glob("*sam*.pt")) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.02)
    time.sleep(0.3)  # let it write a few more checkpoints
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not store.record_path(killed, CLAIM).exists(), "the run finished before it was killed"
    (checkpoint,) = (killed / "checkpoints").glob("*sam*.pt")
    state = torch.load(checkpoint, weights_only=True)
    assert 0 < state["epoch"] < 6000 and not state["finished"]

    assert cli.main(["run", "--spec", str(spec), "--out", str(killed), "--no-progress", "--resume"]) == 0
    done = _run(["run", "--spec", str(spec), "--out", str(whole), "--no-progress"])
    assert done.wait(timeout=300) == 0, done.stderr.read().decode()
    resumed = store.load_records(killed)[CLAIM]
    uninterrupted = store.load_records(whole)[CLAIM]
    assert resumed.verdict == uninterrupted.verdict
    assert compare_records(uninterrupted, resumed) == []


def _train_configs(spec):
    """Every training configuration a Wen et al. claim's spec trains (the rate claim's one per n)."""
    from constructions.xor_runs import TrainConfig

    configs = [v for v in dict(spec).values() if isinstance(v, TrainConfig)]
    if hasattr(spec, "ns"):
        configs = [
            c.model_copy(update={"scenario": c.scenario.model_copy(update={"n": n})}) for c in configs for n in spec.ns
        ]
    return configs


def test_every_committed_checkpoint_is_one_the_claims_look_for():
    """The main job reads the Wen et al. runs back from report/records/checkpoints; a change to a
    checkpoint's key (the configuration, its seed hash, the trainer's code, the versions) would leave
    them unread and retrain for hours. Each committed file must be a run some claim asks for."""
    from pathlib import Path

    from catalogue import registry
    from catalogue.xor_checkpoints import checkpoint_path

    committed = {p.name for p in (Path(__file__).parents[2] / "report/records/checkpoints").glob("xor-*.pt")}
    wanted = set()
    for claim in registry.all_claims("wen2023"):
        for mode in ("full", "paper"):
            if mode == "paper" and claim.paper is None:
                continue
            spec = claim.spec_for(mode)
            specs = [spec, *(c.apply(spec) for c in claim.controls)] if mode == "full" else [spec]  # --controls
            for cfg in (cfg for each in specs for cfg in _train_configs(each)):
                for seed in range(5):
                    for method in ("sam", "gd"):
                        wanted.add(checkpoint_path(cfg, method, seed, Path(".")).name)
    assert committed and committed <= wanted, sorted(committed - wanted)[:5]
