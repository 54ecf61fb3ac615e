"""docs/configuration.md is generated from conf/ and agrees with it: every group and option, described by the
files' own comments, in a stable order."""

from __future__ import annotations

from pathlib import Path

from harness.report.config_reference import COMMAND, PAGE, groups, render, scan_keys

CONF = Path(__file__).resolve().parents[1] / "conf"


def test_the_committed_page_is_what_conf_generates():
    assert PAGE.read_text(encoding="utf-8") == render(), f"docs/configuration.md is out of date: run `{COMMAND}`"


def test_every_group_and_option_of_conf_is_on_the_page():
    page = render()
    found = groups()
    on_disk = {p.parent.relative_to(CONF).as_posix() for p in CONF.glob("**/*.yaml") if p.parent != CONF}
    assert on_disk <= set(found)  # the sweeps link and nested groups included
    for group, options in found.items():
        assert f"## `{group}`" in page
        for option in options:
            assert f"| `{option.name}` | " in page
            assert option.description, f"{group}/{option.name} has no description"


def test_an_option_is_described_by_its_leading_comment_and_keys_by_their_comments(tmp_path):
    (tmp_path / "packer").mkdir()
    (tmp_path / "packer" / "b.yaml").write_text(
        "# @package _global_\n# Second packer. It has a longer story\n# over two lines.\n"
        "_target_: x.B\nbudget: 3  # tokens # of the reader\n"
        "# the inner one\ninner:\n  url: 'http://h#x'\n  text: |\n    a: b\n  after: 1\n"
    )
    (tmp_path / "packer" / "a.yaml").write_text("_target_: harness.pack.none.NoPacker\nname: a\n")
    (tmp_path / "config.yaml").write_text(
        "# Top.\ndefaults:\n  - packer: b  # the usual one\n  - _self_\nseed: 1  # draws\n"
    )
    page = render(tmp_path)
    assert page == render(tmp_path)  # deterministic
    section = page[page.index("## `packer`") :]
    assert section.index("| `a` |") < section.index("| `b` |")  # options sorted, whatever the listing order
    assert "| `b` | Second packer. |" in section
    assert "| [`packer`](#group-packer) | `b` | the usual one |" in page
    assert "| `seed` | `1` | draws |" in page
    keys = {k.path: k for k in scan_keys((tmp_path / "packer" / "b.yaml").read_text())}
    assert keys["budget"].value == "3" and keys["budget"].note == "tokens # of the reader"
    assert keys["inner"].note == "the inner one" and keys["inner.url"].value == "'http://h#x'"
    assert keys["inner.text"].value == "|" and "inner.a" not in keys and keys["inner.after"].value == "1"
    assert keys["_target_"].note == ""  # the file's own comment is not its first key's
