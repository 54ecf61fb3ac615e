"""Code fingerprints follow each stage's own modules: a module added to a stage's folder joins that stage's
fingerprint and no other's, a module shared by two stages is in both, and code outside harness that a
config's ``_target_`` names is part of the run's identity."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cache import fingerprint, stage_code
from tests.conftest import REPO, compose_cfg


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def package(tmp_path, monkeypatch) -> Path:
    """A fake harness: stages alpha and beta share a helper; beta declares gamma, built from _target_s."""
    root = tmp_path / "harness"
    write(root / "__init__.py", "")
    write(root / "shared.py", "def f():\n    return 1\n")
    write(root / "cache" / "__init__.py", "def stable_hash(*parts):\n    return ''\n")
    write(root / "alpha" / "__init__.py", "")
    write(root / "alpha" / "a.py", "from harness.shared import f\nfrom harness.cache import stable_hash\n")
    write(root / "alpha" / "sub.py", "X = 1\n")
    write(root / "beta" / "__init__.py", 'FINGERPRINT_ROOTS = ("harness.gamma",)\n')
    write(root / "beta" / "b.py", "def g():\n    from harness.shared import f\n    return f()\n")
    write(root / "gamma" / "__init__.py", "")
    write(root / "gamma" / "c.py", "Y = 1\n")
    monkeypatch.setattr(stage_code, "PACKAGE_DIR", root)
    return root


def fingerprints(*stages: str) -> dict[str, str]:
    return {stage: stage_code.stage_fingerprint(stage) for stage in stages}


def changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {stage for stage in before if before[stage] != after[stage]}


def test_a_new_module_joins_its_stage_only(package):
    before = fingerprints("alpha", "beta", "sub")
    write(package / "alpha" / "new.py", "Z = 1\n")  # imported by nothing: its folder makes it alpha's
    assert changed(before, fingerprints("alpha", "beta", "sub")) == {"alpha"}
    assert package / "alpha" / "new.py" in stage_code.stage_files("alpha")


def test_a_module_shared_by_two_stages_changes_both(package):
    before = fingerprints("alpha", "beta", "sub")
    write(package / "shared.py", "def f():\n    return 2\n")
    assert changed(before, fingerprints("alpha", "beta", "sub")) == {"alpha", "beta"}


def test_declared_roots_join_the_declaring_stage(package):
    before = fingerprints("alpha", "beta")
    write(package / "gamma" / "new.py", "W = 1\n")  # reached only through a _target_: declared by beta
    assert changed(before, fingerprints("alpha", "beta")) == {"beta"}


def test_storage_is_never_followed(package):
    before = fingerprints("alpha")
    write(package / "cache" / "__init__.py", "def stable_hash(*parts):\n    return 'x'\n")
    assert fingerprints("alpha") == before


def test_a_stage_is_found_from_its_name_or_from_the_module_that_asks(package):
    assert stage_code.stage_roots("alpha") == ("harness.alpha",)
    assert stage_code.stage_roots("sub") == ("harness.alpha.sub",)  # a module named like the stage
    assert stage_code.stage_roots("compress", asker="harness.beta.b") == ("harness.beta.b",)
    with pytest.raises(ValueError, match="unknown stage 'compress'"):
        stage_code.stage_roots("compress", asker="tests.something")
    write(package / "report" / "sub.py", "")  # analysis code is never a stage's
    assert stage_code.stage_roots("sub") == ("harness.alpha.sub",)
    write(package / "beta" / "sub.py", "")
    with pytest.raises(ValueError, match="several modules"):
        stage_code.stage_roots("sub")
    assert stage_code.stage_roots("sub", asker="harness.beta.sub") == ("harness.beta.sub",)


def test_the_real_stages_derive_their_code():
    assert stage_code.stage_roots("read") == ("harness.read",)
    assert stage_code.stage_roots("encoder") == ("harness.retrieve.encoder",)
    assert stage_code.stage_roots("rerank") == ("harness.retrieve.rerank",)
    assert stage_code.stage_roots("pools") == ("harness.run.pools",)  # harness/cache/pools.py is storage
    assert stage_code.stage_roots("compress", asker="harness.pack.llmlingua") == ("harness.pack.llmlingua",)
    tree = {p.relative_to(stage_code.PACKAGE_DIR).as_posix() for p in stage_code.stage_files("tree")}
    # Trees build their LM from a _target_: every backend of harness/lm, declared by the tree package.
    assert {f"lm/{p.name}" for p in (stage_code.PACKAGE_DIR / "lm").glob("*.py")} <= tree


STAGES_SCRIPT = """
import json
from harness.cache.stage_code import stage_fingerprint
print(json.dumps({s: stage_fingerprint(s) for s in ("read", "pools", "tree", "lm", "encoder", "run")}))
"""


@pytest.mark.slow
def test_new_modules_in_a_copied_package_join_their_stage(tmp_path):
    """The real package copied, fingerprints computed by a fresh interpreter on the copy each time."""
    shutil.copytree(REPO / "harness", tmp_path / "harness", ignore=shutil.ignore_patterns("__pycache__"))

    def keys() -> dict[str, str]:
        out = subprocess.run(
            [sys.executable, "-c", STAGES_SCRIPT],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    base = keys()
    write(tmp_path / "harness" / "read" / "new_backend.py", "X = 1\n")
    after_read = keys()
    assert changed(base, after_read) == {"read", "run"}
    write(tmp_path / "harness" / "retrieve" / "new_retriever.py", "X = 1\n")
    after_retrieve = keys()
    assert changed(after_read, after_retrieve) == {"pools", "run"}
    write(tmp_path / "harness" / "lm" / "new_lm.py", "X = 1\n")
    assert changed(after_retrieve, keys()) == {"lm", "tree", "run"}


# ---- code outside harness ---------------------------------------------------------------------------


@pytest.fixture
def outside(tmp_path, monkeypatch) -> Iterator[Path]:
    """A user's package on the path: a packer that imports a helper of its own package."""
    pkg = tmp_path / "outside" / "mypkg"
    write(pkg / "__init__.py", "")
    write(pkg / "helpers.py", "def weight():\n    return 1\n")
    write(pkg / "packers.py", "from mypkg.helpers import weight\n\n\nclass MyPacker:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path / "outside"))
    stage_code.module_fingerprint.cache_clear()
    yield pkg
    stage_code.module_fingerprint.cache_clear()


def test_an_outside_target_module_changes_the_run_identity_when_edited(outside):
    from harness.run.keys import run_key

    cfg = compose_cfg()
    plain_key = run_key(cfg)
    assert fingerprint.OUTSIDE_CODE_KEY not in fingerprint.identity_config(cfg)
    cfg.packer._target_ = "mypkg.packers.MyPacker"
    first = run_key(cfg)
    assert first != plain_key
    identity = fingerprint.identity_config(cfg)
    assert list(identity[fingerprint.OUTSIDE_CODE_KEY]) == ["mypkg.packers.MyPacker"]
    # The pool key's part of the config names no outside code: it stays as it was.
    assert fingerprint.OUTSIDE_CODE_KEY not in fingerprint.identity_config(cfg, ["retriever", "k"])

    def edited(path: Path) -> str:
        path.write_text(path.read_text() + "# edited\n")
        stage_code.module_fingerprint.cache_clear()  # a process sees its modules once
        return run_key(cfg)

    after_packer = edited(outside / "packers.py")
    assert after_packer != first
    assert edited(outside / "helpers.py") != after_packer  # imported by the packer module


def test_a_single_file_outside_module_is_hashed(tmp_path, monkeypatch):
    write(tmp_path / "solo_packer.py", "class Packer:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    stage_code.module_fingerprint.cache_clear()
    first = stage_code.module_fingerprint("solo_packer.Packer")
    assert len(first) == 64
    write(tmp_path / "solo_packer.py", "class Packer:\n    budget = 1\n")
    stage_code.module_fingerprint.cache_clear()
    assert stage_code.module_fingerprint("solo_packer.Packer") != first
    stage_code.module_fingerprint.cache_clear()


def test_installed_and_missing_outside_modules():
    import numpy

    assert stage_code.module_fingerprint("numpy.linalg.norm") == f"installed:numpy=={numpy.__version__}"
    assert stage_code.module_fingerprint("no_such_package_here.Thing") == "missing:no_such_package_here.Thing"
    assert stage_code.outside_targets(
        {"a": {"_target_": "harness.pack.none.NoPacker"}, "b": [{"_target_": "x.Y"}]}
    ) == ["x.Y"]
