"""The report's section registry: built-in order, sections registered from outside the package, duplicates."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pandas as pd
import pytest

from harness.report import sections
from harness.report.cli import build_report, main
from harness.report.contrasts import contrast_tables
from harness.report.diversity import diversity_tables
from harness.report.load import annotate, load_runs
from harness.report.longform import longform_tables
from harness.report.sections import SectionInputs, build_sections, register_section, section_names
from harness.report.tables import (
    Options,
    diagnostic_tables,
    incremental_validity_table,
    inputs_table,
    oracle_table,
    policy_table,
    retrieval_perfect_table,
)
from harness.report.trees import tree_tables
from tests.helpers.report_rows import packing_rows, write_sweep

FAST = ["--resamples", "200", "--study-resamples", "199", "--quiet", "--no-plots", "--no-viewer"]
BUILTIN_ORDER = [
    "runs",
    "policy",
    "diagnostic_validity",
    "incremental_validity",
    "retrieval_perfect",
    "contrasts",
    "oracle_headroom",
    "diversity",
    "trees",
    "longform",
]

TOY_MODULE = """
import pandas as pd

from harness.report.formatting import ReportTable
from harness.report.sections import register_section


def build(inputs):
    data = pd.DataFrame({"questions": [int(inputs.rows["qkey"].nunique())], "metric": [inputs.options.metric]})
    return ReportTable("toy_section", "Toy section from outside", data, data.astype(str), "Registered outside.")


register_section("toy", build, order=ORDER)
"""


@pytest.fixture
def small_sweep(tmp_path):
    frames = [packing_rows(12, packer, 96, seed, "tiny-135m") for packer in ("packed", "submod") for seed in (1, 2)]
    return write_sweep(tmp_path / "sweep", frames)


@pytest.fixture
def toy_module(tmp_path, monkeypatch):
    """A module outside harness/ that registers a section between the contrasts and the oracle headroom."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "toy_report_section.py").write_text(textwrap.dedent(TOY_MODULE).replace("ORDER", "55"))
    monkeypatch.syspath_prepend(str(folder))
    sys.modules.pop("toy_report_section", None)
    yield lambda: importlib.import_module("toy_report_section")
    if "toy" in section_names():
        sections.unregister_section("toy")
    sys.modules.pop("toy_report_section", None)


def test_built_in_sections_keep_the_report_order():
    assert section_names() == BUILTIN_ORDER
    orders = [section.order for section in sections.registered_sections()]
    assert orders == sorted(orders)


def test_built_sections_give_the_tables_of_the_section_functions_in_order(small_sweep):
    rows, infos = load_runs([str(small_sweep)])
    rows, layout = annotate(rows)
    options = Options(n_resamples=200, study_resamples=199)
    expected = [inputs_table(infos, rows).name, policy_table(rows, layout, options).name]
    expected += [t.name for t in diagnostic_tables(rows, options)]
    for table in (incremental_validity_table(rows, options), retrieval_perfect_table(rows, layout, options)):
        expected += [table.name] if table is not None else []
    expected += [t.name for t in contrast_tables(rows, layout, options)[0]]
    oracle = oracle_table(rows, layout, options)
    expected += [oracle.name] if oracle is not None else []
    expected += [t.name for t in diversity_tables(rows, layout, options)[0]]
    expected += [t.name for t in tree_tables(rows, layout, options)]
    expected += [t.name for t in longform_tables(rows, layout, options)]
    report = build_report(rows, layout, infos, options)
    assert [t.name for t in report.tables] == expected
    assert "contrasts" in expected and "oracle_headroom" in expected
    assert report.policy_data is not None and report.contrast_data is not None  # the plots' data


def test_a_section_registered_outside_the_package_appears_in_its_position(small_sweep, toy_module, tmp_path):
    # As from the command line: --import loads the module, which registers its section.
    out = tmp_path / "out"
    assert main([str(small_sweep), "--out", str(out), "--import", "toy_report_section", *FAST]) == 0
    assert section_names() == [*BUILTIN_ORDER[:6], "toy", *BUILTIN_ORDER[6:]]
    toy = pd.read_csv(out / "toy_section.csv")
    assert toy.to_dict("records") == [{"questions": 12, "metric": "f1"}]
    text = (out / "report.md").read_text()
    headings = [line[3:] for line in text.splitlines() if line.startswith("## ")]
    position = headings.index("Toy section from outside")
    assert headings[position - 1].startswith("Where each contrast's")  # the contrasts section's last table
    assert headings[position + 1].startswith("Oracle headroom")
    assert "Registered outside." in text


def test_an_unimportable_section_module_is_a_named_error(small_sweep, tmp_path, capsys):
    assert main([str(small_sweep), "--out", str(tmp_path / "out"), "--import", "no_such_sections", *FAST]) == 2
    assert "--import no_such_sections: No module named 'no_such_sections'" in capsys.readouterr().err


def test_a_section_that_does_not_apply_is_left_out(small_sweep):
    rows, infos = load_runs([str(small_sweep)])
    rows, layout = annotate(rows)
    calls = []
    register_section("never", lambda inputs: calls.append(1), applies=lambda rows: False)
    try:
        tables = build_sections(SectionInputs(rows, layout, Options(n_resamples=50), infos))
    finally:
        sections.unregister_section("never")
    assert calls == [] and "never" not in [t.name for t in tables]


def test_a_duplicate_section_name_is_an_error_naming_it(toy_module):
    with pytest.raises(ValueError, match="'contrasts'"):
        register_section("contrasts", lambda inputs: None)
    toy_module()
    with pytest.raises(ValueError, match="'toy'"):
        register_section("toy", lambda inputs: None)
    assert section_names().count("toy") == 1


def test_a_section_without_an_order_goes_last():
    register_section("last", lambda inputs: None)
    try:
        assert section_names()[-1] == "last"
    finally:
        sections.unregister_section("last")
    assert section_names() == BUILTIN_ORDER
