"""``python -m harness.report.config_reference``: docs/configuration.md, the reference of every config in conf/.

The page is built from the files alone: each option's description is the leading comment of its YAML file (the
first sentence; a file without one is described by the docstring of its ``_target_`` class, else by its values),
and each key carries its trailing comment (else the comment lines right above it). Groups, options and keys come
in sorted order, so the page changes only when conf/ does; ``tests/test_config_reference.py`` fails while the
committed page and conf/ disagree. The module lives in ``harness/report`` because no run key covers it: editing
the generator never invalidates a finished run.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONF = REPO / "conf"
PAGE = REPO / "docs" / "configuration.md"
COMMAND = "python -m harness.report.config_reference"
# A sentence ends at a full stop followed by a capital; "e.g." and "i.e." are no ends.
_SENTENCE_END = re.compile(r"(?<!e\.g)(?<!i\.e)\.\s+(?=[A-Z`(])")
# A defaults-list entry that takes an option of another group: ``- /lm@lm: local_smollm2``.
_REFERENCE = re.compile(r"^\s*-\s+(?:override\s+)?/([\w/]+)@", re.M)
_KEY = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z_$][\w.@/${}-]*|'[^']*'|\"[^\"]*\"):(?:\s+(?P<value>.*))?$")


@dataclass(frozen=True)
class Key:
    path: str  # dotted, from the file's root
    value: str  # as written in the file; empty for a mapping or a block list
    note: str  # its trailing comment, else the comment block right above it


@dataclass(frozen=True)
class Option:
    name: str  # the path below its group, without .yaml
    description: str
    keys: tuple[Key, ...]
    text: str  # the file as written


def split_comment(line: str) -> tuple[str, str]:
    """(content, comment) of one YAML line; a ``#`` inside quotes or glued to a word starts no comment."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :].strip()
    return line.rstrip(), ""


def leading_comment(text: str) -> str:
    """The comment lines at the top of a file (a Hydra ``# @package`` line excepted), joined into one text."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        if not line.startswith("# @package"):
            lines.append(line.lstrip("#").strip())
    return " ".join(part for part in lines if part)


def first_sentence(text: str) -> str:
    return _SENTENCE_END.split(text.strip(), maxsplit=1)[0].rstrip(".") + "." if text.strip() else ""


def scan_keys(text: str) -> list[Key]:
    """Every key of a config file as a dotted path, with its value as written and its comment. Items of block
    lists are not keys (their parent is listed with an empty value); block scalars are shown as ``|``."""
    keys: list[Key] = []
    stack: list[tuple[int, str]] = []  # (indent, key) of the enclosing mappings
    above: list[str] = []  # comment lines since the last key
    block = -1  # indent of a key whose block scalar is being skipped
    seen = False  # the file's leading comment describes the file, not its first key
    for raw in text.splitlines():
        indent = len(raw) - len(raw.lstrip())
        if block >= 0 and (not raw.strip() or indent > block):
            continue
        block = -1
        content, comment = split_comment(raw)
        if not content.strip():
            above = [*above, comment] if comment and not comment.startswith("@package") else []
            continue
        match = _KEY.match(content)
        if match is None:  # a list item or a continued flow value
            above = []
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key = match["key"].strip("'\"")
        value = (match["value"] or "").strip()
        stack.append((indent, key))
        note = comment or (" ".join(c for c in above if c) if seen else "")
        keys.append(Key(".".join(k for _, k in stack), value, note))
        above, seen = [], True
        if value[:1] in "|>" and value:
            block = indent
    return keys


def target_summary(target: str) -> str:
    """The first sentence of the docstring of a ``harness`` class named by ``_target_`` (read, not imported)."""
    module, _, name = target.rpartition(".")
    if not module.startswith("harness."):
        return ""
    path = REPO.joinpath(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    if not path.is_file():
        return ""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name == name:
            return first_sentence(" ".join((ast.get_docstring(node) or "").split()))
    return ""


def describe(text: str, keys: Sequence[Key]) -> str:
    """One line: the leading comment's first sentence, else the target's docstring, else the values."""
    values = {k.path: k.value for k in keys}
    taken = [f"{group}: {option}" for group, (option, _) in defaults_list(text).items() if group != "_self_"]
    settings = [f"{k.path}: {k.value}" for k in keys if k.value and k.path != "defaults"]
    return (
        first_sentence(leading_comment(text))
        or target_summary(values.get("_target_", ""))
        or ", ".join(f"`{item}`" for item in [*taken, *settings])
    )


def load_option(path: Path, group_dir: Path) -> Option:
    text = path.read_text(encoding="utf-8")
    keys = scan_keys(text)
    name = path.relative_to(group_dir).with_suffix("").as_posix()
    return Option(name, describe(text, keys), tuple(keys), text)


def groups(conf: Path = CONF) -> dict[str, list[Option]]:
    """Every config group under ``conf`` (nested ones as ``hydra/launcher``, ``sweeps/packing_ablation``; the
    ``sweeps`` link is followed) with its options, sorted."""
    found: dict[str, list[Option]] = {}
    for folder, subfolders, files in os.walk(conf, followlinks=True):
        subfolders.sort()
        here = Path(folder)
        if here == conf:
            continue
        options = [load_option(here / f, here) for f in sorted(files) if f.endswith(".yaml")]
        if options:
            found[here.relative_to(conf).as_posix()] = options
    return dict(sorted(found.items()))


def defaults_list(text: str) -> dict[str, tuple[str, str]]:
    """{group: (default option, comment)} of the primary config's defaults list."""
    entries: dict[str, tuple[str, str]] = {}
    for raw in text.splitlines():
        content, comment = split_comment(raw)
        item = re.match(r"^\s*-\s+(?:override\s+)?(?P<group>[\w/@.]+):\s*(?P<option>\S+)\s*$", content)
        if item:
            entries[item["group"]] = (item["option"], comment)
    return entries


def references(found: dict[str, list[Option]]) -> dict[str, list[str]]:
    """{group: the options (``tree/raptor``) whose defaults list takes an option of it (``- /lm@lm: ...``)}."""
    users: dict[str, list[str]] = {}
    for group, options in found.items():
        for option in options:
            for used in sorted(set(_REFERENCE.findall(option.text))):
                users.setdefault(used, []).append(f"{group}/{option.name}")
    return users


def select_with(group: str, defaults: dict[str, tuple[str, str]], users: dict[str, list[str]]) -> str:
    """How a command line picks an option: ``group=NAME`` for a group in the defaults list (Hydra's own groups
    included), else the configs that take it, else ``+group=NAME`` to add one."""
    if group in defaults or (group.startswith("hydra/") and group not in users):
        return f"`{group}=NAME`"
    if group in users:
        return "the defaults of " + ", ".join(f"`{user}`" for user in users[group])
    return f"`+{group}=NAME`"


def cell(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def code(text: str) -> str:
    return f"`{cell(text)}`" if text else ""


def anchor(group: str) -> str:
    return "group-" + re.sub(r"[^a-z0-9]+", "-", group.lower()).strip("-")


def key_table(keys: Sequence[Key]) -> list[str]:
    rows = [f"| {code(k.path)} | {code(k.value)} | {cell(k.note)} |" for k in keys]
    return ["| key | value | note |", "|---|---|---|", *rows]


def render(conf: Path = CONF) -> str:
    primary = (conf / "config.yaml").read_text(encoding="utf-8")
    defaults = defaults_list(primary)
    found = groups(conf)
    users = references(found)
    lines = [
        "# Configuration reference",
        "",
        f"<!-- Generated by `{COMMAND}` from conf/; do not edit by hand. -->",
        "",
        f"Every config group of `conf/` with its options, generated by `{COMMAND}` from the files themselves: an "
        "option's description is the first sentence of its file's leading comment, and each key carries its "
        "trailing comment. Edit the YAML file, then regenerate this page; `tests/test_config_reference.py` fails "
        "while the two disagree.",
        "",
        "## Top level (`conf/config.yaml`)",
        "",
        leading_comment(primary),
        "",
        "| group | default | note |",
        "|---|---|---|",
        *(
            f"| [{code(group)}](#{anchor(group)}) | {code(option)} | {cell(note)} |"
            for group, (option, note) in sorted(defaults.items())
        ),
        "",
        *key_table([k for k in scan_keys(primary) if not k.path.startswith("defaults")]),
        "",
        "## Groups",
        "",
        "| group | chosen by | options |",
        "|---|---|---|",
        *(
            f"| [{code(group)}](#{anchor(group)}) | {cell(select_with(group, defaults, users))} | {len(options)} |"
            for group, options in found.items()
        ),
    ]
    for group, options in found.items():
        lines += list(_group_section(group, options, defaults, users))
    return "\n".join(lines).rstrip() + "\n"


def _group_section(
    group: str, options: Sequence[Option], defaults: dict[str, tuple[str, str]], users: dict[str, list[str]]
) -> Iterator[str]:
    default = defaults.get(group, ("", ""))[0]
    chosen = f" (default: `{default}`)" if default and default != "null" else ""
    yield from ["", f'<a id="{anchor(group)}"></a>', "", f"## `{group}`", ""]
    yield from [f"Chosen by {select_with(group, defaults, users)}{chosen}.", ""]
    yield from ["| option | description |", "|---|---|"]
    yield from (f"| `{o.name}` | {cell(o.description)} |" for o in options)
    for option in options:
        if option.keys:
            yield from ["", f"<details><summary><code>{option.name}</code>: keys</summary>", ""]
            yield from key_table(option.keys)
            yield from ["", "</details>"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description="Write the configuration reference of conf/.")
    parser.add_argument("--out", type=Path, default=PAGE, help=f"the page (default: {PAGE.relative_to(REPO)})")
    parser.add_argument("--check", action="store_true", help="exit 1 when the page differs from conf/; write nothing")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.is_file() else ""
        if current != text:
            print(f"{args.out} is out of date; regenerate it with `{COMMAND}`")
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
