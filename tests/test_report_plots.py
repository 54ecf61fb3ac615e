import math

import pandas as pd
from PIL import Image

from harness.report.load import Layout
from harness.report.plots import plot_budget_curves, plot_reader_ladder, reader_scale


def test_reader_scale_orders_names_by_parameter_count():
    assert reader_scale("qwen2.5-7b") == 7e9
    assert reader_scale("qwen2.5-7b-nf4") == 7e9
    assert reader_scale("smollm2-135m") == 1.35e8
    assert reader_scale("Qwen2.5-32B") == 32e9
    assert math.isinf(reader_scale("phi3.5-mini"))
    names = ["qwen2.5-32b", "smollm2-135m", "flan-t5-base", "qwen2.5-3b"]
    assert sorted(names, key=lambda r: (reader_scale(r), r)) == [
        "smollm2-135m",
        "qwen2.5-3b",
        "qwen2.5-32b",
        "flan-t5-base",
    ]


def policy_data(budgets):
    records = []
    for policy, shift in (("packer=packed", 0.0), ("packer=submod", 0.1)):
        for budget in budgets:
            mean = 0.3 + shift + budget / 1000
            records.append(
                {
                    "budget": budget,
                    "policy": policy,
                    "f1": mean,
                    "f1_ci_low": mean - 0.05,
                    "f1_ci_high": mean + 0.05,
                    "answer_in_context": mean + 0.2,
                    "answer_in_context_ci_low": float("nan"),
                    "answer_in_context_ci_high": float("nan"),
                }
            )
    return pd.DataFrame(records)


def test_budget_curves_need_two_budgets(tmp_path):
    layout = Layout(settings=("budget",), policy=("packer",))
    assert plot_budget_curves(policy_data([96]), layout, tmp_path) == []
    [path] = plot_budget_curves(policy_data([64, 96, 160]), layout, tmp_path)
    assert path.name == "budget_curves.png" and path.stat().st_size > 10_000
    with Image.open(path) as image:
        assert image.size == (1800, 690)


def test_reader_ladder_needs_two_readers(tmp_path):
    layout = Layout(settings=("budget",), policy=("packer", "reader"), conditions=("reader",))
    contrasts = pd.DataFrame(
        {
            "budget": [96, 96],
            "policy.packer": ["submod"] * 2,
            "policy.reader": ["qwen2.5-7b", "smollm2-135m"],
            "baseline": ["b1", "b2"],
            "baseline_name": ["packer=packed"] * 2,
            "mean_diff": [0.05, 0.1],
            "ci_low": [0.0, 0.05],
            "ci_high": [0.1, 0.15],
        }
    )
    assert plot_reader_ladder(contrasts.iloc[:1], layout, "f1", tmp_path) == []
    [path] = plot_reader_ladder(contrasts, layout, "f1", tmp_path)
    assert path.stat().st_size > 10_000
