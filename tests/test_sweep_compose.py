"""Sweep composition kept from the sweeper's check and config files kept per process give the same configs."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import pytest
from hydra import compose, initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.types import RunMode
from omegaconf import OmegaConf

from harness.run import sweep_compose
from harness.run.sweep_compose import compose_once
from tests.conftest import CONF, REPO

JOBS = [
    ["+sweeps=replication_packing", "packer=submod", "budget=160", "seed=42"],
    ["+sweeps=replication_packing", "packer=mmr", "budget=96", "seed=13"],
    ["experiment=trees_qasper", "tree=dtcrs"],
    ["dataset=demo", "reader=smollm2_135m_gguf", "packer=oracle"],
]


@pytest.mark.process
def test_kept_config_files_compose_what_hydra_composes_afresh():
    script = textwrap.dedent(
        f"""
        import sys
        from hydra import compose, initialize_config_dir
        from omegaconf import OmegaConf
        from harness.run.sweep_compose import compose_once
        if sys.argv[1] == "kept":
            compose_once()
        with initialize_config_dir(config_dir={str(CONF)!r}, version_base="1.3"):
            for _ in range(2):  # the second round reads kept files
                for overrides in {JOBS!r}:
                    print(OmegaConf.to_yaml(compose("config", overrides=overrides, return_hydra_config=True)))
        """
    )
    outputs = [
        subprocess.run(
            [sys.executable, "-c", script, mode], cwd=REPO, check=True, capture_output=True, text=True
        ).stdout
        for mode in ("afresh", "kept")
    ]
    assert outputs[0] == outputs[1]
    assert outputs[0].count("_target_: harness.pack.submod.SubmodularPacker") == 2


def test_an_edited_config_file_is_read_again(tmp_path):
    conf = tmp_path / "conf"
    shutil.copytree(CONF, conf)
    compose_once()
    packer = conf / "packer" / "mmr.yaml"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        before = compose("config", overrides=["packer=mmr"])
        packer.write_text(packer.read_text() + "\nnote: edited\n")
        after = compose("config", overrides=["packer=mmr"])
    assert "note" not in before.packer
    assert after.packer.note == "edited"
    assert OmegaConf.to_container(after.packer) == {**OmegaConf.to_container(before.packer), "note": "edited"}


SWEEPS = sorted(p.stem for p in (REPO / "sweeps").glob("*.yaml"))


@pytest.mark.parametrize("sweep", SWEEPS)
def test_every_sweeps_jobs_derive_the_configs_a_full_composition_gives(sweep, monkeypatch):
    """The sweeper's own job list (command line + the sweep's params), each job's config as the launcher
    gets it, hydra node included, equal to Hydra's full composition of the same overrides."""
    compose_once()
    derived: list[bool] = []
    derive = sweep_compose._Templates.derive

    def counted(self, *args):
        config = derive(self, *args)
        derived.append(config is not None)
        return config

    monkeypatch.setattr(sweep_compose._Templates, "derive", counted)
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        arguments = [f"+sweeps={sweep}", "hydra.sweep.dir=/tmp/sweep-compose-test"]
        master = loader.load_configuration("config", arguments, RunMode.MULTIRUN)
        params = [f"{key}={value}" for key, value in master.hydra.sweeper.params.items()]
        parsed = OverridesParser.create().parse_overrides([*params, *arguments])
        jobs = [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]
        chosen = jobs if len(jobs) <= 8 else [*jobs[:6], *jobs[-2:]]
        compose_fully = ConfigLoaderImpl.load_sweep_config.__wrapped__  # type: ignore[attr-defined]
        for job in chosen:
            for_launcher = loader.load_sweep_config(master, list(job))
            assert OmegaConf.to_yaml(for_launcher) == OmegaConf.to_yaml(compose_fully(loader, master, list(job)))
    value_keys = {k for k in master.hydra.sweeper.params if "/" not in k and k not in master.hydra.runtime.choices}
    if value_keys and len(chosen) > 2:
        assert any(derived), "no job was derived"


def test_a_full_template_store_keeps_the_newest_so_a_later_sweep_still_derives_its_jobs():
    """A long-lived process runs sweep after sweep (a notebook's harness.sweep calls, a test worker): once the
    store holds its limit of templates, the oldest gives way, so the next sweep's jobs are derived, not composed
    in full every time."""
    store = sweep_compose._Templates()
    first = [object() for _ in range(store.LIMIT)]
    config = OmegaConf.create({"x": 1})
    key = ((), ())
    for master in first:
        store.add(master, sweep_compose._Split([], [], key), config)
    assert len(store.held) == store.LIMIT
    later = object()
    store.add(later, sweep_compose._Split([], [], key), config)
    assert len(store.held) == store.LIMIT
    assert store._find(later, sweep_compose._Split([], [], key)) is not None
    assert store._find(first[0], sweep_compose._Split([], [], key)) is None  # the oldest gave way
