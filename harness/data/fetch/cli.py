"""The command line of the data fetch: ``python -m harness.data list | fetch NAME... | urls NAME...``.

Exit status: 0 done, 1 a fetch failed (network, checksum, unsafe archive, a member missing), 2 a name or a
registry file that cannot be used. A dataset that fails does not stop the next; the fetch ends with what was
fetched and what failed.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import yaml

from harness.core.home import DATA_DIR_ENV, default_data_dir
from harness.data.fetch.download import MIRROR_ENV, TIMEOUT_S
from harness.data.fetch.fetch import Fetched, IncompleteFetch, fetch_dataset, presence
from harness.data.fetch.registry import Dataset, RegistryError, load_registry

DATASET_CONFIGS = Path(__file__).resolve().parents[3] / "conf" / "dataset"
_UNDER_DATA_DIR = re.compile(r"\$\{paths\.data_dir\}/([^}\s]+)")


def _size(size: int | None) -> str:
    if size is None:
        return "unknown"
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000  # type: ignore[assignment]
    return ""


def _checksums(dataset: Dataset) -> str:
    published = [f for f in dataset.files if f.sha256]
    if len(published) == len(dataset.files):
        return "pinned"
    return "first use" if not published else "some pinned"


def _list(datasets: dict[str, Dataset], data_dir: Path) -> int:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"datasets (data folder {data_dir})", show_lines=True)
    for column in ("name", "configs", "here", "size", "checksum", "license", "source", "citation"):
        table.add_column(column, overflow="fold")
    for dataset in datasets.values():
        table.add_row(
            dataset.name,
            ", ".join(dataset.configs),
            presence(dataset, data_dir),
            _size(dataset.size),
            _checksums(dataset),
            dataset.license,
            dataset.files[0].sources[0],
            dataset.citation,
        )
    Console(width=200).print(table)
    print(
        "fetch one with: python -m harness.data fetch NAME (checksum 'first use': no published hash; the first "
        "fetch records it)"
    )
    return 0


def _unknown(names: list[str], datasets: dict[str, Dataset]) -> list[str]:
    return [name for name in names if name not in datasets]


def _default_path(config: str) -> tuple[str, str | None] | None:
    """The key a packaged dataset config reads its data from (``path``, or ``root`` for a folder) and that
    default's part under ``${paths.data_dir}`` (None when it is elsewhere); None when there is no such config."""
    conf = DATASET_CONFIGS / f"{config}.yaml"
    if not conf.is_file():
        return None
    raw = yaml.safe_load(conf.read_text(encoding="utf-8")) or {}
    key = "path" if "path" in raw or "root" not in raw else "root"
    under = _UNDER_DATA_DIR.search(str(raw.get(key) or ""))
    return key, under.group(1) if under else None


def _fetched_path(dataset: Dataset, data_dir: Path, folder: bool) -> Path:
    """The fetched file a run reads, or for a config that reads a folder, the folder holding every file."""
    if not folder:
        return data_dir / dataset.files[0].path
    return data_dir / os.path.commonpath([str(Path(f.path).parent) for f in dataset.files])


def run_command(dataset: Dataset, data_dir: Path) -> str:
    """A run that reads what the fetch of ``dataset`` put in ``data_dir``. A user's entry may name a packaged
    config whose default path is another file, or no config at all: then the command names the fetched file."""
    config = dataset.configs[0]
    default = _default_path(config)
    if default is None:  # no packaged config of that name: the user picks the one of the file's layout
        fetched = _fetched_path(dataset, data_dir, folder=False)
        return (
            f"python -m harness dataset=CONFIG dataset.path={fetched} (CONFIG: the dataset config of its layout; "
            f"there is no conf/dataset/{config}.yaml)"
        )
    key, under = default
    if under is None or not any(f.path == under or f.path.startswith(under + "/") for f in dataset.files):
        folder = key == "root" or (under is not None and "." not in Path(under).name)  # beir reads a folder
        return f"python -m harness dataset={config} dataset.{key}={_fetched_path(dataset, data_dir, folder)}"
    if data_dir != default_data_dir().resolve():  # the run looks in its own paths.data_dir, not --data-dir
        return f"python -m harness dataset={config} paths.data_dir={data_dir}"
    return f"python -m harness dataset={config}"


def _report(results: list[Fetched]) -> None:
    for result in results:
        print(f"{result.action:10} {result.path}  sha256 {result.sha256}")


def _fetch(
    names: list[str], datasets: dict[str, Dataset], data_dir: Path, mirror: str | None, quiet: bool, timeout: float
) -> int:
    fetched: list[str] = []
    failed: list[str] = []
    for name in dict.fromkeys(names):  # once each; one dataset's failure does not stop the next
        dataset = datasets[name]
        print(f"{name}: {dataset.description or dataset.name} -> {data_dir}", file=sys.stderr)
        try:
            results = fetch_dataset(dataset, data_dir, mirror, progress=not quiet, timeout=timeout)
        except IncompleteFetch as error:  # the files that came are reported, each one that did not named
            _report(error.fetched)
            for why in dict.fromkeys(why for _, why in error.failed):  # members of one failed archive share it
                print(f"error: {name}: {why}", file=sys.stderr)
            some = f" ({len(error.fetched)} of {len(dataset.files)} files fetched)" if error.fetched else ""
            failed.append(name + some)
            continue
        _report(results)
        fetched.append(name)
        print(f"{name}: ready; run it with: {run_command(dataset, data_dir)}", file=sys.stderr)
    print(f"fetched: {', '.join(fetched) or 'none'}", file=sys.stderr)
    if failed:
        print(f"failed: {', '.join(failed)} (the errors above say why)", file=sys.stderr)
    return 1 if failed else 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness.data",
        description="List and fetch the official files of the benchmarks the dataset configs read. Files go to "
        f"the data folder (--data-dir, else ${DATA_DIR_ENV}, else the harness checkout's data/), where every "
        "dataset config looks for them.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--registry",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="a registry file of your own datasets in the same format (repeatable; its entries "
        "replace packaged ones of the same name)",
    )
    common.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help=f"the data folder (default: ${DATA_DIR_ENV} or the checkout's data/)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "list",
        parents=[common],
        help="every registered dataset: configs, whether here, size, license, source, citation",
    )
    fetch = commands.add_parser("fetch", parents=[common], help="download, verify and place the files of NAME...")
    fetch.add_argument("names", nargs="+", metavar="NAME")
    fetch.add_argument(
        "--mirror",
        default=os.environ.get(MIRROR_ENV) or None,
        metavar="URL",
        help=f"fetch from this server instead of the sources (default ${MIRROR_ENV}): one that "
        "serves a data folder as fetched, each file at URL/PATH (python -m harness.data urls)",
    )
    fetch.add_argument("--quiet", action="store_true", help="no progress bars")
    fetch.add_argument(
        "--timeout",
        type=float,
        default=TIMEOUT_S,
        metavar="SECONDS",
        help=f"give up on a source that sends nothing for this long (default {TIMEOUT_S:g})",
    )
    urls = commands.add_parser(
        "urls", parents=[common], help="PATH and official URL of what NAME... downloads (to fill a mirror by hand)"
    )
    urls.add_argument("names", nargs="+", metavar="NAME")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        datasets = load_registry(args.registry)
    except RegistryError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    data_dir = (args.data_dir or default_data_dir()).resolve()
    if args.command == "list":
        return _list(datasets, data_dir)
    unknown = _unknown(args.names, datasets)
    if unknown:
        print(
            f"error: no dataset named {', '.join(unknown)} in the registry; known: {', '.join(datasets)} "
            "(python -m harness.data list)",
            file=sys.stderr,
        )
        return 2
    if args.command == "urls":
        for name in args.names:
            for path, url in dict.fromkeys((f.download_path, f.sources[0]) for f in datasets[name].files):
                print(f"{path}\t{url}")
        return 0
    return _fetch(args.names, datasets, data_dir, args.mirror, args.quiet, args.timeout)
