"""``python -m harness.preview <a multirun's overrides> [--gpus 4x24GiB]``: every job a sweep would launch, with
its launcher, resources, memory plan and cost, before any starts (:mod:`harness.run.sweep_preview`).

An entry point at the root, beside ``python -m harness``: it composes whole runs, so it sits above the run layer
(``python -m harness.plan --sweep`` hands its arguments here). Exit status 2 when a job's plan does not fit.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.preview",
        description="List the jobs a multirun with these overrides would launch (as after -m): the launcher block, "
        "the cache, what a +sweeps file fixes, and per job its overrides, resources, memory plan and estimated "
        "cost. Nothing starts and no folder is written.",
    )
    parser.add_argument("overrides", nargs="*", help="the multirun's Hydra overrides (packer=packed,submod ...)")
    parser.add_argument("--gpus", help="a node's GPUs (4x24GiB); default: the visible CUDA GPUs")
    args = parser.parse_intermixed_args(argv)
    from harness.plan.cli import command_error
    from harness.plan.gpus import parse_gpus, visible_gpus
    from harness.run.sweep_preview import preview

    try:
        lines, fits = preview(args.overrides, parse_gpus(args.gpus) if args.gpus else visible_gpus())
    except Exception as error:
        return command_error("harness.preview", error)
    print("\n".join(lines))
    return 0 if fits else 2


if __name__ == "__main__":
    sys.exit(main())
