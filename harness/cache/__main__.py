"""``python -m harness.cache``: list or copy a cache (a folder of SQLite files or a postgresql:// URL).

python -m harness.cache info .cache/harness
python -m harness.cache copy .cache/harness postgresql://user@dbhost/harness
python -m harness.cache copy postgresql://user@dbhost/harness /scratch/cache

A location it cannot use (an unsupported URL, a file or a folder that is not a cache, a damaged SQLite file,
an unreachable server) is one line on stderr naming it, and exit status 1. ``copy`` leaves behind every entry
a run would refuse, names each on stderr and then exits with status 1 too.
"""

from __future__ import annotations

import argparse
import logging
import sys

from harness.cache.copy import LocationError, check_location, copy_cache, describe, entry_batches, reseal, stores
from harness.cache.errors import CacheAccessError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.cache",
        description="List or copy the harness cache (embeddings, responses, pools, trees, compressions) between "
        "a cache folder (SQLite files) and a PostgreSQL database (cache.url).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    info = commands.add_parser("info", help="list the stores at a location and how many entries each holds")
    info.add_argument("location", help="a cache folder or a postgresql:// URL")
    copy = commands.add_parser("copy", help="copy every store from SRC into DST (entries already in DST are kept)")
    copy.add_argument("source", metavar="SRC", help="a cache folder or a postgresql:// URL")
    copy.add_argument("destination", metavar="DST", help="a cache folder or a postgresql:// URL")
    copy.add_argument("--quiet", action="store_true", help="no progress bar")
    upgrade = commands.add_parser(
        "reseal",
        help="keep the entries an older version wrote (sealed before entries were bound to their keys) in a "
        "cache folder you trust",
    )
    upgrade.add_argument("folder", help="a cache folder (SQLite files)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return run(args)
    except (LocationError, CacheAccessError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def run(args: argparse.Namespace) -> int:
    if args.command == "info":
        names = stores(args.location)
        print(describe(args.location))
        for name in names:
            print(f"  {name}\t{sum(len(batch) for batch in entry_batches(args.location, name))} entries")
        return 0
    if args.command == "reseal":
        check_location(args.folder, "folder")
        resealed = reseal(args.folder)
        for name, count in resealed.items():
            print(f"  {name}\t{count} entries resealed")
        print(f"resealed {sum(resealed.values())} entries in {args.folder}")
        return 0
    done = copy_cache(args.source, args.destination, progress=not args.quiet)
    for copied in done:
        skipped = f" ({copied.skipped} damaged, left behind)" if copied.skipped else ""
        print(f"{copied.store}\t{copied.entries} entries{skipped}")
    print(
        f"copied {sum(c.entries for c in done)} entries in {len(done)} stores from {describe(args.source)} "
        f"to {describe(args.destination)}"
    )
    left_behind = [where for copied in done for where in copied.left_behind]
    for where in left_behind:
        print(f"left behind: {where}", file=sys.stderr)
    if left_behind:
        print(f"error: {len(left_behind)} entries a run would refuse were left behind (named above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
