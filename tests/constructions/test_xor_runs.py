"""Wen et al.'s runs at toy size: the configuration's schedule, a seeded run, and what is read off a log."""

import pytest
import torch

from constructions import xor_runs
from constructions.specs import XorSpec
from constructions.xor_training import Phase


def test_schedule_reads_phases_or_the_late_rho():
    plain = xor_runs.TrainConfig(arch="nobias", sam_epochs=10)
    assert xor_runs.sam_schedule(plain) == [Phase(10, 0.01, 0.05)]
    late = xor_runs.TrainConfig(arch="bias", sam_epochs=10, sam_rho_late=(4, 0.1))
    assert xor_runs.sam_schedule(late) == [Phase(4, 0.01, 0.05), Phase(6, 0.01, 0.1)]
    phased = xor_runs.TrainConfig(arch="simbn", sam_phases=((3, 0.005, 0.1), (2, 0.003, 1.0)))
    assert xor_runs.sam_schedule(phased) == [Phase(3, 0.005, 0.1), Phase(2, 0.003, 1.0)]
    assert xor_runs.trace_infimum(late) == pytest.approx(4 * 31**0.5) and xor_runs.trace_infimum(plain) is None


def _tiny(method="sam"):
    cfg = xor_runs.TrainConfig(
        arch="nobias", scenario=XorSpec(d=6, n=20), width=8, runs=2, sam_epochs=40, gd_steps=200, test_samples=200,
        log_points=4, hessian_samples=0,
    )  # fmt: skip
    generators = {tag: torch.Generator().manual_seed(i) for i, tag in enumerate(("xor", "test", "init", "order"))}
    return cfg, xor_runs.train_runs(cfg, method, generators)


def test_a_run_is_its_generators_and_its_summary_reads_the_last_epoch():
    cfg, (nets, log, data) = _tiny()
    _, (_, again, _) = _tiny()
    assert torch.equal(log.train_loss, again.train_loss)
    final = xor_runs.final_summary(log)
    assert final["diverged_runs"] == 0 and final["train_loss_max"] == float(log.train_loss[:, -1].max())
    assert final["test_error"] == pytest.approx(float(log.test_error[:, -1].mean()))
    assert len(final["test_error_per_run"]) == cfg.runs and final["steps_per_run"] == log.steps
    assert len(xor_runs.flatness_over_minimum(nets, data)) == cfg.runs


def test_degradation_is_read_after_the_switch_and_near_epoch_4000():
    _, (_, log, _) = _tiny()
    one_phase = xor_runs.sam_degradation(log, [Phase(40, 0.01, 0.05)])
    assert "sam_test_error_rise_after_switch" not in one_phase
    two = xor_runs.sam_degradation(log, [Phase(10, 0.01, 0.05), Phase(30, 0.01, 0.1)])
    mean = log.test_error.mean(0)
    first_after = next(k for k, e in enumerate(log.epochs) if e >= 10)
    assert two["sam_test_error_rise_after_switch"] == pytest.approx(float(mean[-1] - mean[first_after]))
    assert two["sam_test_error_near_epoch_4000"][0] == log.epochs[-1]  # the last logged epoch is the nearest
