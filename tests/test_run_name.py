"""Runs are named after what sets them apart: a sweep's job after the keys its sweep varies, a single run after
its overrides; never plumbing, and never a reader when nothing is read."""

from __future__ import annotations

from omegaconf import OmegaConf

from harness.run.run_name import run_name, swept_keys


def multirun(folder, task: list[str], params: dict | None = None):
    hydra = {"overrides": {"task": task}, "sweeper": {"params": params}}
    OmegaConf.save(OmegaConf.create({"hydra": hydra}), folder / "multirun.yaml")
    return folder


def test_a_sweep_job_is_named_after_the_keys_its_sweep_varies(tmp_path):
    sweep = multirun(tmp_path, ["packer=packed,submod", "budget=96,160", "reader=smollm2_135m", "logger=none"])
    assert swept_keys(sweep) == ["packer", "budget"]
    job = ["packer=submod", "budget=96", "reader=smollm2_135m", "logger=none"]
    assert run_name(job, reads=True, sweep_dir=sweep) == "packer=submod budget=96"


def test_the_grid_of_a_sweeps_file_counts_and_a_reader_that_reads_nothing_does_not(tmp_path):
    sweep = multirun(tmp_path, ["+sweeps=replication_ladder", "reader=a,b"], {"packer": "packed,submod", "seed": 42})
    assert swept_keys(sweep) == ["reader", "packer"]
    job = ["+sweeps=replication_ladder", "reader=b", "packer=packed", "seed=42"]
    assert run_name(job, reads=True, sweep_dir=sweep) == "reader=b packer=packed"
    assert run_name(job, reads=False, sweep_dir=sweep) == "packer=packed"


def test_a_single_run_is_named_after_its_overrides_less_plumbing():
    given = ["dataset=hotpotqa", "budget=96", "logger=none", "paths.cache_dir=/tmp/c", "hydra.run.dir=/tmp/r"]
    assert run_name([*given, "reader=smollm2_135m", "reader.batch_size=4"], reads=False) == "dataset=hotpotqa budget=96"
    assert run_name(["logger=none"], reads=True) == "defaults"
