"""``python -m harness.report diff``: the questions two policies disagree on, worked out from known rows, and
one question's two contexts side by side."""

from __future__ import annotations

import pandas as pd

from harness.report.diff import main
from tests.helpers.report_rows import packing_rows, write_sweep


def sweep(tmp_path):
    frames = []
    for packer in ("packed", "submod"):
        for budget in (96, 160):
            frame = packing_rows(10, packer, budget, 42, "tiny-135m")
            frame["context"] = [f"{packer} context of {q} at {budget} [not markup]" for q in frame["question_id"]]
            frames.append(frame)
    write_sweep(tmp_path / "sweep", frames)
    return tmp_path / "sweep", pd.concat(frames, ignore_index=True)


def test_diff_lists_the_questions_where_two_policies_disagree(tmp_path, capsys):
    folder, rows = sweep(tmp_path)
    wide = rows.pivot_table(index=["budget", "question_id"], columns="packer", values="answer_in_context")
    differ = wide[wide["submod"] != wide["packed"]]
    assert len(differ) > 0  # submod adds the answer where v < B / 100 but not B / 160
    args = [str(folder), "--a", "packer=submod", "--b", "packer=packed", "--metric", "answer_in_context"]
    assert main([*args, "--limit", "0"]) == 0
    out = capsys.readouterr().out
    higher = int((differ["submod"] > differ["packed"]).sum())
    assert f"{len(differ)} of {len(wide)} (question, setting) pairs differ on answer_in_context" in out
    assert f"packer=submod higher on {higher}, packer=packed higher on {len(differ) - higher}" in out
    listed = {(int(b), q) for b, q in differ.index}
    for budget, question in listed:
        assert any(question in line and f" {budget} " in line for line in out.splitlines()), (budget, question)
    # F1 is submod's plus 0.1 on every question: every pair differs, by +0.1.
    assert main([str(folder), "--a", "packer=submod", "--b", "packer=packed", "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert f"{len(wide)} of {len(wide)} (question, setting) pairs differ on f1" in out
    assert out.count("+0.1") == 3 and f"... and {len(wide) - 3} more" in out


def test_diff_prints_one_questions_two_contexts_side_by_side(tmp_path, capsys):
    folder, _ = sweep(tmp_path)
    argv = [str(folder), "--a", "packer=submod", "--b", "packer=packed", "--question", "q003", "--budget", "160"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "What is fact q003?" in out and "gold: answer q003" in out and "budget=160" in out
    line = next(x for x in out.splitlines() if "submod context of q003 at 160" in x)
    assert "packed context of q003 at 160" in line  # the two contexts on one line, side by side
    assert "[not markup]" in line and "at 96" not in out


def test_diff_names_a_bad_filter_and_exits_2(tmp_path, capsys):
    folder, _ = sweep(tmp_path)
    assert main([str(folder), "--a", "packer=mmr", "--b", "packer=packed"]) == 2
    assert capsys.readouterr().err == "error: --a 'packer=mmr': no row has packer=mmr (packer: packed, submod)\n"
    assert main([str(folder), "--a", "packr=submod", "--b", "packer=packed"]) == 2
    assert "--a 'packr=submod': 'packr' is neither a row column nor a config key" in capsys.readouterr().err
    assert main([str(folder), "--a", "packer=submod", "--b", "packer=packed", "--question", "nope"]) == 2
    assert "question 'nope' has no row" in capsys.readouterr().err
