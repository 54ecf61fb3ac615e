import math

import pandas as pd
import pytest

from harness.report.formatting import ReportTable, fmt, fmt_ci, fmt_p, is_numeric_column, render_markdown


def test_cells():
    assert fmt(math.nan) == "–" and fmt(True) == "yes" and fmt(3) == "3" and fmt(1234.5) == "1234"
    assert fmt(-0.0001) == "0.000"
    assert fmt_ci(0.5, 0.25, 0.75) == "0.500 [0.250, 0.750]" and fmt_ci(150.0, 140.0, 160.0) == "150.0 [140.0, 160.0]"
    assert fmt_ci(0.5, math.nan, math.nan) == "0.500"
    assert fmt_p(0.0001) == "1.0e-04" and fmt_p(0.04) == "0.040"


@pytest.mark.parametrize(
    "cells, numeric",
    [
        (["0.500 [0.250, 0.750]", "-0.125", "–"], True),
        (["12", "1.0e-04", ".5"], True),
        (["3 / 4 / 10", "0 / 0 / 2"], True),
        (["packed", "0.5"], False),
        (["yes", ""], False),
        (["-packed"], False),
        (["2026-11-29"], False),
        (["[10.0, 4.0]"], False),
        ([], False),
    ],
)
def test_numeric_columns_are_the_ones_whose_every_cell_is_a_number(cells, numeric):
    assert is_numeric_column(pd.Series(cells, dtype=object)) is numeric


def test_render_markdown_escapes_pipes():
    table = ReportTable("t", "Title", pd.DataFrame(), pd.DataFrame({"a|b": ["x|y"]}), note="n", footnote="f")
    text = render_markdown([table], "Report", plots=["p.png"])
    assert "| a\\|b |" in text and "| x\\|y |" in text and "CSV: `t.csv`" in text and "![p.png](p.png)" in text
