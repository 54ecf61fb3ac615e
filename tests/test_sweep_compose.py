"""Sweep composition kept from the sweeper's check and config files kept per process give the same configs."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from harness.sweep_compose import compose_once
from tests.conftest import CONF, REPO

JOBS = [
    ["+sweeps=replication_packing", "packer=submod", "budget=160", "seed=42"],
    ["+sweeps=replication_packing", "packer=mmr", "budget=96", "seed=13"],
    ["experiment=trees_qasper", "tree=dtcrs"],
    ["dataset=demo", "reader=smollm2_135m_gguf", "packer=oracle"],
]


def test_kept_config_files_compose_what_hydra_composes_afresh():
    script = textwrap.dedent(
        f"""
        import sys
        from hydra import compose, initialize_config_dir
        from omegaconf import OmegaConf
        from harness.sweep_compose import compose_once
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
