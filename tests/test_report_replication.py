"""The replication document: verdicts from intervals, pooled paired contrasts, and a render over fake studies."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from harness.report.load import normalise_rows
from harness.report.replication import (
    INJECTION_OPEN,
    LADDER,
    LLMLINGUA,
    PACKING,
    PACKING_DATASETS,
    READER_BUDGETS,
    READER_IRCOT,
    TREES,
    Settings,
    main,
    render,
    verdict,
)
from harness.report.replication.document import rebuild_sections
from harness.stats.power import minimum_detectable_effect
from tests.helpers.report_rows import packing_rows, write_sweep


@pytest.mark.parametrize(
    ("low", "high", "direction", "expected"),
    [
        (0.01, 0.10, 1, "reproduced"),
        (-0.10, -0.01, 1, "reversed"),
        (-0.10, 0.10, 1, "not reproduced (the interval includes zero)"),
        (-0.10, -0.01, -1, "reproduced"),  # the paper says "less": an interval below zero reproduces it
        (0.01, 0.10, -1, "reversed"),
        (float("nan"), 0.1, 1, "not testable (no interval)"),
    ],
)
def test_verdict_reads_the_interval_against_the_papers_direction(low, high, direction, expected):
    assert verdict(low, high, direction) == expected


def test_an_interval_including_zero_refutes_only_a_design_that_could_see_the_paper_effect():
    assert verdict(-0.1, 0.1, 1, mde=0.2, paper=0.05) == "underpowered (MDE 0.200 vs paper +0.050)"
    assert verdict(-0.01, 0.01, 1, mde=0.02, paper=0.05) == (
        "not reproduced (the interval includes zero; MDE 0.020 below the paper's 0.050)"
    )
    assert verdict(0.01, 0.1, 1, mde=0.2, paper=0.05) == "reproduced"  # a clear interval needs no power argument
    # relative changes (the trees' build time) read as percentages
    assert verdict(-0.77, 2.26, -1, mde=2.442, paper=-0.81, percent=True) == "underpowered (MDE 244% vs paper −81%)"


def test_contrast_pools_question_seed_pairs_and_reports_the_per_question_mean(tmp_path):
    # q1 is drawn by two seeds and won both times; q2 by one seed and tied.
    rows = normalise_rows(
        pd.DataFrame(
            {
                "question_id": ["q1", "q1", "q2"] * 2,
                "seed": [1, 2, 1] * 2,
                "packer": ["submod"] * 3 + ["packed"] * 3,
                "aic": [1.0, 1.0, 0.0, 0.0, 0.0, 0.0],
            }
        )
    )
    result = Settings(tmp_path, tmp_path / "r.md", 200).contrast(rows, "packer", "submod", "packed", "aic")
    assert result["mean_diff"] == pytest.approx(2 / 3)  # pooled like the tables' means
    assert result["unique_diff"] == pytest.approx(0.5)  # each question once
    assert (result["won"], result["lost"], result["n"]) == (2, 0, 3)
    # power over questions: q1's mean difference 1, q2's 0 -> SD 0.7071 over n = 2
    assert result["n_questions"] == 2 and result["sd"] == pytest.approx(2**-0.5)
    assert result["mde"] == pytest.approx(minimum_detectable_effect(2**-0.5, 2))
    assert result["ci_low"] <= result["mean_diff"] <= result["ci_high"]


def test_render_gives_the_packing_verdict_and_lists_studies_not_run(tmp_path):
    studies = tmp_path / "studies"
    frames = [
        packing_rows(20, packer, budget, seed, "tiny-135m")
        for packer in ("packed", "submod")
        for budget in (96, 160)
        for seed in (42, 13)
    ]
    write_sweep(studies / PACKING.directory, frames)
    out = tmp_path / "docs" / "replication.md"
    assert main(["--studies", str(studies), "--out", str(out), "--resamples", "300"]) == 0
    text = out.read_text()

    rows = pd.concat(frames)
    at_160 = rows[rows["budget"] == 160].pivot_table(
        index=["question_id", "seed"], columns="packer", values="gold_doc_coverage"
    )
    expected = (at_160["submod"] - at_160["packed"]).mean()
    verdict_line = next(line for line in text.splitlines() if line.startswith("**Verdict (B = 160)"))
    assert f"submod − naive {expected:.3f} [" in verdict_line.split("gold coverage")[1]
    summary_row = next(line for line in text.splitlines() if line.startswith("| seed 000: submod > naive on gold cov"))
    assert f"| {expected:.3f} [" in summary_row  # the verdict table repeats the section's figure
    assert "**Not run yet.**" in text and LADDER.command in text
    assert (out.parent / "replication" / "packing_budget.png").stat().st_size > 0
    # The same inputs give the same document.
    assert render(Settings(studies, out, 300)) == text


def test_trees_section_totals_fresh_builds_only(tmp_path):
    """RAPTOR builds per document (the second question on a document reads the cached tree), DTCRS per
    question: totals over fresh builds, worked out by hand."""

    def rows(tree, builds):
        return pd.DataFrame(
            {
                "question_id": ["q1", "q2", "q3"],
                "dataset": "qasper",
                "tree": tree,
                "seed": 42,
                "tree.build_seconds": [b[0] for b in builds],
                "tree.summary_nodes": [b[1] for b in builds],
                "tree.lm_calls": [b[1] for b in builds],
                "tree.lm_prompt_tokens": [b[1] * 100 for b in builds],
                "tree.cached": [b[2] for b in builds],
            }
        )

    studies = tmp_path / "studies"
    raptor = rows("raptor", [(100.0, 10, False), (100.0, 10, True), (100.0, 10, False)])
    dtcrs = rows("dtcrs", [(20.0, 2, False), (5.0, 0, False), (5.0, 0, False)])
    write_sweep(studies / TREES.directory, [raptor, dtcrs])
    text = render(Settings(studies, tmp_path / "r.md", 300))
    # build time 30 s vs 200 s: -85%; summary nodes 2 vs 20: -90%
    # Rows without a classifier column (an older study) were routed by the LM classifier.
    assert "| seed 002: DTCRS (lm classifier) below RAPTOR on build time (qasper) |" in text
    line = next(x for x in text.splitlines() if x.startswith("| seed 002: DTCRS (lm classifier) below RAPTOR on build"))
    assert "-85% [" in line
    # The MDE of the build-time change: fresh DTCRS builds 20, 5, 5 s resampled (the two fresh RAPTOR builds
    # always total 200 s): SD of a 3-draw total sqrt(3 * 50) = 12.25 s, of the ratio 0.0612, MDE 2.80 * 0.0612
    # = 17% (± a point of bootstrap noise at 300 resamples); far below the paper's 81%, so a null would count.
    mde = re.search(r"3 DTCRS and 2 RAPTOR builds, MDE (\d+)%", line)
    assert mde and 15 <= int(mde.group(1)) <= 19
    assert "- qasper, DTCRS (lm classifier): summary nodes -90% [" in text
    assert "accuracy not measured" in line
    assert (tmp_path / "r" / "trees.png").stat().st_size > 0
    assert "| qasper | dtcrs (lm) | 3 | 3 | 1 | 2 | 30.0 | 20.0 | 2 | 200 |" in text
    table = text[text.index("| dataset | tree |") :]
    assert "| qasper | raptor | 3 | 2 | 2 | 20 | 200.0 | 100.0 | 20 | 2000 |" in table


def test_a_dtcrs_that_built_no_tree_is_not_counted_as_a_saving(tmp_path):
    """A classifier that sends every question to the dense pool "saves" all of RAPTOR's cost; the verdict says
    there was no tree to compare instead of reproducing the paper's saving."""
    frame = {"question_id": ["q1", "q2", "q3"], "dataset": "qasper", "seed": 42, "tree.cached": False}
    raptor = pd.DataFrame({**frame, "tree": "raptor", "tree.build_seconds": [90.0, 100.0, 110.0],
                           "tree.summary_nodes": [10, 12, 14]})  # fmt: skip
    dtcrs = pd.DataFrame({**frame, "tree": "dtcrs", "tree.build_seconds": [0.5, 0.6, 0.7],
                          "tree.summary_nodes": [0, 0, 0]})  # fmt: skip
    studies = tmp_path / "studies"
    write_sweep(studies / TREES.directory, [raptor, dtcrs])
    text = render(Settings(studies, tmp_path / "r.md", 300))
    line = next(x for x in text.splitlines() if x.startswith("| seed 002: DTCRS (lm classifier) below RAPTOR on build"))
    assert "| no DTCRS tree to compare (its classifier sent every question to the dense pool) |" in line
    assert "-99% (no tree built)" in line and "reproduced" not in line


def classifier_study_rows(shift: float = 0.0) -> list[pd.DataFrame]:
    """A trees study with both DTCRS classifiers and a classification-only run, by hand:

    annotated classes q1 abstractive, q2 extractive, q3 yes_no, q4 abstractive (q4 only in the
    classification run, over every question). The LM classifier: q1 abstractive (LM output parsed), q2
    abstractive (rules), q3 extractive (rules), q4 extractive (rules); so 1 of 3 right on the trees'
    sample and 1 of 4 on all questions, output parsed for 1 of 3 (1 of 4), rules for 2 of 3 (3 of 4)."""
    lm_cls = {"q1": ("abstractive", "lm", True), "q2": ("abstractive", "rules", False)}
    lm_cls |= {"q3": ("extractive", "rules", False), "q4": ("extractive", "rules", False)}
    annotated = {"q1": "abstractive", "q2": "extractive", "q3": "yes_no", "q4": "abstractive"}

    def frame(tree, qids, builds, classifier=None):
        data = pd.DataFrame(
            {
                "question_id": qids,
                "dataset": "qasper",
                "tree": tree,
                "seed": 42,
                "cfg.tree.lm.name": "tiny-gguf",
                "tree.build_seconds": [b[0] + shift for b in builds],
                "tree.summary_nodes": [b[1] for b in builds],
                "tree.lm_calls": [b[1] for b in builds],
                "tree.lm_prompt_tokens": [b[1] * 100 for b in builds],
                "tree.cached": False,
            }
        )
        if classifier is not None:
            data["tree.classifier"] = classifier
            data["tree.annotated_class"] = [annotated[q] for q in qids]
            if classifier == "lm":
                data["tree.question_class"] = [lm_cls[q][0] for q in qids]
                data["tree.class_source"] = [lm_cls[q][1] for q in qids]
                data["tree.lm_parsed"] = [lm_cls[q][2] for q in qids]
            else:
                data["tree.question_class"] = [annotated[q] for q in qids]
                data["tree.class_source"] = "annotation"
                data["tree.lm_parsed"] = None
            data["tree.annotators"] = 1
            data["tree.annotator_agreement"] = 1.0
        return data

    sample = ["q1", "q2", "q3"]
    return [
        frame("raptor", sample, [(100.0, 10, False)] * 3),
        frame("dtcrs", sample, [(20.0, 2, False), (20.0, 2, False), (1.0, 0, False)], "lm"),
        frame("dtcrs", sample, [(30.0, 3, False), (1.0, 0, False), (1.0, 0, False)], "annotation"),
        frame("dtcrs_classify", [*sample, "q4"], [(1.0, 0, False)] * 4, "lm"),
    ]


def test_trees_verdicts_name_their_classifier_and_its_accuracy(tmp_path):
    studies = tmp_path / "studies"
    write_sweep(studies / TREES.directory, classifier_study_rows())
    text = render(Settings(studies, tmp_path / "r.md", 300))
    lines = text.splitlines()
    lm = next(x for x in lines if x.startswith("| seed 002: DTCRS (lm classifier) below RAPTOR on build time"))
    assert "accuracy 33% (1/3) on trees' sample (LM output parsed 1/3, rules 2/3)" in lm
    assert "accuracy 25% (1/4) on all questions (LM output parsed 1/4, rules 3/4)" in lm
    oracle = next(x for x in lines if x.startswith("| seed 002: DTCRS (annotation classifier) below RAPTOR on build"))
    assert "accuracy 100% (3/3) on trees' sample" in oracle and "an oracle" in oracle
    # build time: lm 41 s vs RAPTOR 300 s: -86%; annotation 32 s: -89%
    assert "-86% [" in lm and "-89% [" in oracle
    # The LM built trees for q1 (annotated abstractive) and q2 (extractive); the oracle for q1 only.
    assert "DTCRS built a tree for 2 of 3 questions (1 of them annotated abstractive, of 1 such questions)" in text
    assert "DTCRS built a tree for 1 of 3 questions (1 of them annotated abstractive, of 1 such questions)" in text
    assert "| qasper | dtcrs (lm) | 3 | 3 | 2 | 4 | 41.0 |" in text
    assert "| qasper | dtcrs (annotation) | 3 | 3 | 1 | 3 | 32.0 |" in text
    # The agreement table and the LM classifier's confusion matrix over all questions (annotated by predicted).
    assert "| qasper | all questions | lm | tiny-gguf | 4 | 0 | 25% (1/4) | 0.25 | 1.00 | 0.75 |" in text
    assert "| qasper | tiny-gguf | abstractive | 1 | 1 | 0 |" in text  # q1 right, q4 called extractive
    assert "| qasper | tiny-gguf | extractive | 0 | 1 | 0 |" in text  # q2 called abstractive
    assert "| qasper | tiny-gguf | yes_no | 1 | 0 | 0 |" in text  # q3 called extractive
    # 2 of the 4 annotated questions are abstractive: 50%, Wilson [15%, 85%] includes the paper's 20%.
    assert "- qasper: 50% (2/4) of the annotated questions are abstractive (95% Wilson [15%, 85%])" in text
    assert "| seed 002: more than 20% of QASPER questions are abstractive (annotated type) | not reproduced" in text


def test_sections_option_rebuilds_only_the_named_sections(tmp_path):
    """--sections trees replaces the trees section and its verdict rows and keeps the packing section and its
    rows as written, even once the packing study is gone."""
    studies = tmp_path / "studies"
    frames = [packing_rows(20, packer, 160, 42, "tiny-135m") for packer in ("packed", "submod")]
    write_sweep(studies / PACKING.directory, frames)
    write_sweep(studies / TREES.directory, classifier_study_rows())
    out = tmp_path / "docs" / "replication.md"
    assert main(["--studies", str(studies), "--out", str(out), "--resamples", "300"]) == 0
    before = out.read_text()
    # Same runs: the rebuilt document is the document.
    assert rebuild_sections(before, ["trees"], Settings(studies, out, 300)) == before

    import shutil

    shutil.rmtree(studies / PACKING.directory)  # the other studies' runs are not on this machine
    shutil.rmtree(studies / TREES.directory)
    write_sweep(studies / TREES.directory, classifier_study_rows(shift=50.0))
    assert main(["--studies", str(studies), "--out", str(out), "--resamples", "300", "--sections", "trees"]) == 0
    after = out.read_text()

    def section(text, title):
        start = text.index(f"## {title}")
        end = text.find("\n## ", start + 1)
        return text[start : end if end >= 0 else len(text)]

    packing_title = next(x[3:] for x in before.splitlines() if x.startswith("## Seed 000: budgeted packing"))
    assert section(after, packing_title) == section(before, packing_title)
    assert "**Not run yet.**" not in section(after, packing_title)
    verdicts = [x for x in after.splitlines() if x.startswith("| seed ")]
    assert [x for x in verdicts if x.startswith("| seed 000")] == [
        x for x in before.splitlines() if x.startswith("| seed 000")
    ]
    # The trees rows are the new runs' (build times 50 s longer), in the trees rows' place, none left over.
    trees_title = "Seed 002: RAPTOR vs the query-driven tree (DTCRS): nodes and build time"
    assert section(after, trees_title) != section(before, trees_title)
    assert "| qasper | dtcrs (lm) | 3 | 3 | 2 | 4 | 191.0 |" in after
    assert sum(x.startswith("| seed 002") for x in verdicts) == sum(
        x.startswith("| seed 002") for x in before.splitlines()
    )
    assert verdicts.index(next(x for x in verdicts if x.startswith("| seed 002"))) > max(
        i for i, x in enumerate(verdicts) if x.startswith("| seed 000")
    )
    with pytest.raises(SystemExit):
        main(["--out", str(out), "--sections", "nonsense"])


def test_a_rebuilt_section_without_old_rows_goes_after_the_earlier_sections_rows(tmp_path):
    studies = tmp_path / "studies"
    write_sweep(studies / TREES.directory, classifier_study_rows())
    title = "Seed 002: RAPTOR vs the query-driven tree (DTCRS): nodes and build time"
    document = (
        "# Replication study\n\nIntro.\n\n## Verdicts\n\n| claim | verdict | evidence |\n|---|---|---|\n"
        "| seed 001: x | reproduced | e |\n| seed 000: submod > naive on y | reversed | f |\n\n"
        f"## Other\n\nkept\n\n## {title}\n\nold text\n"
    )
    text = rebuild_sections(document, ["trees"], Settings(studies, tmp_path / "r.md", 300))
    rows = [x for x in text.splitlines() if x.startswith("| seed ")]
    assert rows[:2] == ["| seed 001: x | reproduced | e |", "| seed 000: submod > naive on y | reversed | f |"]
    assert all(x.startswith("| seed 002") for x in rows[2:]) and len(rows) > 2
    assert "## Other\n\nkept\n\n## Seed 002" in text and "old text" not in text
    # A document without the section gets it at its end (no section rebuilt before it in the call).
    added = rebuild_sections(
        "# x\n\n## Verdicts\n\n## Other\n\nkept\n", ["trees"], Settings(studies, tmp_path / "r.md", 300)
    )
    assert added.index("## Other") < added.index(f"## {title}") and "| seed 002" in added


def test_other_datasets_get_their_own_packing_rows_with_n_and_mde(tmp_path):
    studies = tmp_path / "studies"
    main_rows = [packing_rows(20, p, b, s, "tiny-135m") for p in ("packed", "submod") for b in (96, 160) for s in (42,)]
    write_sweep(studies / PACKING.directory, main_rows)
    musique = [frame.assign(dataset="musique") for frame in main_rows]
    write_sweep(studies / PACKING_DATASETS.directory, musique)
    text = render(Settings(studies, tmp_path / "r.md", 300))
    row = next(
        x
        for x in text.splitlines()
        if x.startswith("| seed 000: submod > naive on answer-in-context (B = 160, musique)")
    )
    assert "n = 20, SD " in row and "MDE " in row
    table = text[text.index("| dataset | B | metric |") :]
    assert "| musique | 160 | AiC |" in table and "| synthetic | 160 | AiC |" in table


def test_reader_columns_give_paired_f1_contrasts_with_their_power(tmp_path):
    studies = tmp_path / "studies"
    frames = [packing_rows(30, p, 160, 42, "qwen-1.5b") for p in ("packed", "focused", "submod", "oracle")]
    write_sweep(studies / READER_IRCOT.directory, frames)
    text = render(Settings(studies, tmp_path / "r.md", 300))
    section = text[text.index("## Seed 000: reader columns at a larger n") :]
    # packing_rows gives submod exactly packed's F1 + 0.1 on every question: the interval is that point.
    assert "| submod − packed | F1 | 0.100 [0.100, 0.100] | 30 | 0.000 |" in section
    row = next(x for x in text.splitlines() if x.startswith("| seed 000: submod > naive on reader F1 (B = 160"))
    assert "| reproduced |" in row and "n = 30" in row
    assert "| oracle − submod | F1 |" in section


def test_injection_verdicts_carry_the_mde_of_their_contrasts(tmp_path):
    from tests.test_report_cli import diversity_sweep

    studies = tmp_path / "studies"
    diversity_sweep(studies / INJECTION_OPEN.directory)
    text = render(Settings(studies, tmp_path / "r.md", 300))
    row = next(x for x in text.splitlines() if x.startswith("| seed 001: diversifying costs S-Recall on clean pools"))
    assert "MDE " in row and "MDE –" not in row
    section = text[text.index("## Seed 001") :]
    line = next(x for x in section.splitlines() if x.startswith("- mmr − kNN: clean"))
    assert re.search(r"\(n = \d+\)$", line)  # the test split's queries (the rest tuned the operating points)


def test_the_validity_verdict_carries_an_mde_read_off_its_interval(tmp_path):
    studies = tmp_path / "studies"
    frames = [packing_rows(30, p, 160, 42, r) for r in ("tiny-135m", "big-7b") for p in ("packed", "submod")]
    write_sweep(studies / LADDER.directory, frames)
    text = render(Settings(studies, tmp_path / "r.md", 300))
    row = next(x for x in text.splitlines() if x.startswith("| seed 000: answer-in-context explains F1 beyond"))
    found = re.search(r"\[(-?[\d.]+), (-?[\d.]+)\]; n = 30 questions, MDE ([\d.]+)", row)
    assert found, row
    low, high, mde = map(float, found.groups())
    # (z_0.975 + z_0.8) * (high - low) / (2 * z_0.975), from the printed (rounded) interval
    assert mde == pytest.approx(2.801585 * (high - low) / (2 * 1.959964), abs=0.002)


def test_the_default_reader_gets_its_own_validity_verdict_beside_the_strongest_rung(tmp_path):
    from harness.report.replication.ladder import default_reader

    studies = tmp_path / "studies"
    readers = ("tiny-135m", default_reader(), "big-7b")
    frames = [packing_rows(30, p, 160, 42, r) for r in readers for p in ("packed", "submod")]
    write_sweep(studies / LADDER.directory, frames)
    text = render(Settings(studies, tmp_path / "r.md", 300))
    claims = [x for x in text.splitlines() if x.startswith("| seed 000: answer-in-context explains F1 beyond")]
    assert [c.split("(")[1].split(")")[0] for c in claims] == ["big-7b", default_reader()]
    assert f"**Verdict, validity (the default reader, {default_reader()}):" in text


def test_the_strongest_rungs_submod_naive_f1_is_claimed_once(tmp_path):
    """The reader-columns study and the ladder read the same answers of the strongest rung at B = 160: the
    verdict table states submod − naive on F1 for it once, and the ladder keeps its other contrasts."""
    studies = tmp_path / "studies"
    packers = ("packed", "focused", "submod")
    write_sweep(
        studies / LADDER.directory, [packing_rows(30, p, 160, 42, r) for r in ("tiny-135m", "big-7b") for p in packers]
    )

    def claims() -> list[str]:
        lines = render(Settings(studies, tmp_path / "r.md", 300)).splitlines()
        return [x.split(" | ")[0] for x in lines if " on F1 (" in x or " on reader F1 (" in x]

    assert "| seed 000: submod − packed > 0 on F1 (big-7b)" in claims()
    write_sweep(studies / READER_IRCOT.directory, [packing_rows(30, p, 160, 42, "big-7b") for p in packers])
    found = claims()
    assert "| seed 000: submod − packed > 0 on F1 (big-7b)" not in found
    assert "| seed 000: submod > naive on reader F1 (B = 160, big-7b)" in found
    assert "| seed 000: submod − focused > 0 on F1 (big-7b)" in found


def test_the_llmlingua_row_comes_from_its_own_study_and_names_its_compressor(tmp_path):
    studies = tmp_path / "studies"
    write_sweep(studies / PACKING.directory, [packing_rows(20, p, 160, 42, "none") for p in ("packed", "submod")])
    write_sweep(
        studies / READER_BUDGETS.directory, [packing_rows(20, p, 160, 42, "tiny-135m") for p in ("packed", "submod")]
    )
    compressed = packing_rows(20, "llmlingua", 160, 42, "tiny-135m").assign(
        **{"pack.method": "llmlingua-1", "pack.model": "offline:smollm2", "pack.numerics": "bfloat16|cpu=amx"}
    )
    write_sweep(studies / LLMLINGUA.directory, [compressed])
    text = render(Settings(studies, tmp_path / "r.md", 300))
    assert "LLMLingua: LongLLMLingua's question-aware compression over offline:smollm2 in bfloat16|cpu=amx." in text
    row = next(x for x in text.splitlines() if x.startswith("| 160 | LLMLingua |")).split(" | ")
    assert row[2].startswith("20 rows") and row[-3] == "20"  # its selection columns from its own rows, all read


def test_a_study_begun_without_a_finished_job_hides_no_other_study(tmp_path):
    studies = tmp_path / "studies"
    packings = [packing_rows(20, p, b, 42, "none") for p in ("packed", "submod") for b in (96, 160)]
    write_sweep(studies / PACKING.directory, packings)
    unfinished = studies / READER_BUDGETS.directory / "0"
    unfinished.mkdir(parents=True)
    (unfinished / "rows.journal.jsonl").write_text("")  # killed before its first job finished
    write_sweep(studies / LLMLINGUA.directory, [packing_rows(20, "llmlingua", b, 42, "tiny-135m") for b in (96, 160)])
    text = render(Settings(studies, tmp_path / "r.md", 300))
    for budget in (96, 160):
        row = next(x for x in text.splitlines() if x.startswith(f"| {budget} | LLMLingua |")).split(" | ")
        assert row[-3] == "20"  # read on its 20 questions
    assert not any(x.startswith("| 160 | submodular |") and x.split(" | ")[-3] != "0" for x in text.splitlines())


def test_packing_table_reads_f1_and_em_beside_the_selection_columns_naming_the_numerics(tmp_path):
    studies = tmp_path / "studies"
    selection = [packing_rows(20, p, b, 42, "none") for p in ("packed", "submod") for b in (96, 160)]
    write_sweep(studies / PACKING.directory, selection)
    # the reader reads B = 160 only, on every question
    read = [
        packing_rows(20, p, 160, 42, "tiny-135m").assign(reader_numerics="transformers/hf/bfloat16/cpu-amx")
        for p in ("packed", "submod")
    ]
    write_sweep(studies / READER_BUDGETS.directory, read)
    text = render(Settings(studies, tmp_path / "r.md", 300))
    assert "F1 and EM: tiny-135m (transformers/hf/bfloat16/cpu-amx) reading the same packers' contexts" in text
    header = next(x for x in text.splitlines() if x.startswith("| B | packer |"))
    assert header.endswith("| n read | F1 | EM |")
    submod_96 = next(x for x in text.splitlines() if x.startswith("| 96 | submodular |"))
    assert submod_96.endswith("| 0 | – | – |")  # not read at B = 96
    submod_160 = next(x for x in text.splitlines() if x.startswith("| 160 | submodular |")).split(" | ")
    em = float(submod_160[-1].split()[0])
    frame = read[1]
    assert em == pytest.approx(frame["em"].mean(), abs=0.0005)
    # the contrasts table carries the reader's F1 and EM: submod is packed + 0.1 on F1 for every question
    f1_row = next(x for x in text.splitlines() if x.startswith("| synthetic | 160 | F1 |"))
    assert f1_row.split(" | ")[3].startswith("0.100")
    assert any(x.startswith("| synthetic | 160 | EM |") for x in text.splitlines())
    claim = "| seed 000: submod > naive on F1 (B = 160, read by tiny-135m (transformers/hf/bfloat16/cpu-amx)) |"
    assert next(x for x in text.splitlines() if x.startswith(claim)).split(" | ")[1] == "reproduced"
    # rebuilding the reader-columns section leaves the packing section's F1 verdict in place
    out = tmp_path / "replication.md"
    out.write_text(text)
    assert (
        main(["--studies", str(studies), "--out", str(out), "--sections", "reader_columns", "--resamples", "200"]) == 0
    )
    assert claim in out.read_text()


def test_trees_section_with_classification_runs_only_scores_the_classifier(tmp_path):
    studies = tmp_path / "studies"
    write_sweep(studies / TREES.directory, classifier_study_rows()[3:])
    text = render(Settings(studies, tmp_path / "r.md", 300))
    assert "| qasper | all questions | lm | tiny-gguf | 4 | 0 | 25% (1/4) |" in text
    assert "No tree runs yet" in text and "| seed 002: DTCRS" not in text


def _seed_frame(seeds_values: dict[int, list[float]], qids: dict[int, list[str]] | None = None) -> pd.DataFrame:
    return pd.concat(
        pd.DataFrame(
            {
                "qkey": (qids or {}).get(seed, [f"q{i}" for i in range(len(values))]),
                "seed": seed,
                "budget": 160,
                "packer": "submod",
                "answer_in_context": values,
            }
        )
        for seed, values in seeds_values.items()
    )


def test_row_count_says_when_seeds_repeat_the_same_sample():
    from harness.report.replication.packing import row_count, seeds_repeat

    metrics = ["answer_in_context"]
    # three seeds, the same three questions, identical values: 9 rows that hold 3 questions' worth
    repeated = _seed_frame({0: [1.0, 0.0, 1.0], 1: [1.0, 0.0, 1.0], 2: [1.0, 0.0, 1.0]})
    assert seeds_repeat(repeated, metrics)
    assert row_count(repeated, metrics) == "9 rows (3 seeds, 3 distinct questions; the seeds repeat the same sample)"
    # the same questions but one value differs: the seeds add information
    differ = _seed_frame({0: [1.0, 0.0, 1.0], 1: [1.0, 1.0, 1.0]})
    assert not seeds_repeat(differ, metrics)
    assert row_count(differ, metrics) == "6 rows (2 seeds, 3 distinct questions)"
    # the same values on different questions
    other_questions = _seed_frame({0: [1.0, 0.0], 1: [1.0, 0.0]}, qids={0: ["q0", "q1"], 1: ["q2", "q3"]})
    assert row_count(other_questions, metrics) == "4 rows (2 seeds, 4 distinct questions)"
    assert row_count(_seed_frame({0: [1.0, 0.0]}), metrics) == "2 rows (1 seed, 2 distinct questions)"
    nan_twice = _seed_frame({0: [float("nan"), 1.0], 1: [float("nan"), 1.0]})
    assert seeds_repeat(nan_twice, metrics)  # NaN equals NaN


def test_repeated_seeds_leave_the_question_clustered_interval_unchanged():
    from harness.stats.bootstrap import clustered_mean_ci

    # The bootstrap resamples questions, a question's rows from every seed together: three identical seeds
    # give the interval of one seed, not a narrower one from 3 x as many "independent" rows.
    one = _seed_frame({0: [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0]})
    three = _seed_frame({seed: one["answer_in_context"].tolist() for seed in (0, 1, 2)})
    single = clustered_mean_ci(one, ["answer_in_context"], "qkey", 2000, 0.95, 0)["answer_in_context"]
    pooled = clustered_mean_ci(three, ["answer_in_context"], "qkey", 2000, 0.95, 0)["answer_in_context"]
    assert pooled == pytest.approx(single)


def test_packing_table_says_repeated_seeds_repeat_the_sample(tmp_path):
    studies = tmp_path / "studies"
    # seed 13's rows are seed 42's, relabelled: the same questions and identical rows
    frames = [
        packing_rows(20, packer, budget, 42, "tiny-135m").assign(seed=seed)
        for packer in ("packed", "submod")
        for budget in (96, 160)
        for seed in (42, 13)
    ]
    write_sweep(studies / PACKING.directory, frames)
    out = tmp_path / "replication.md"
    assert main(["--studies", str(studies), "--out", str(out), "--resamples", "200"]) == 0
    text = out.read_text()
    assert "| 40 rows (2 seeds, 20 distinct questions; the seeds repeat the same sample) |" in text
    assert "the seeds draw the same questions and give identical rows, so they repeat one sample" in text
    # seeds that draw differently are counted without the clause
    differ = [
        packing_rows(20, packer, budget, seed, "tiny-135m")
        for packer in ("packed", "submod")
        for budget in (96, 160)
        for seed in (42, 13)
    ]
    write_sweep(tmp_path / "other" / PACKING.directory, differ)
    assert main(["--studies", str(tmp_path / "other"), "--out", str(out), "--resamples", "200"]) == 0
    text = out.read_text()
    assert "| 40 rows (2 seeds, 20 distinct questions) |" in text
    assert "the seeds repeat the same sample" not in text and "so they repeat one sample" not in text


def test_the_packing_section_links_only_a_viewer_that_travels_with_the_document(tmp_path):
    studies = tmp_path / "studies"
    frames = [
        packing_rows(20, packer, budget, 42, "tiny-135m") for packer in ("packed", "submod") for budget in (96, 160)
    ]
    write_sweep(studies / PACKING.directory, frames)
    # Beside the studies (the default document): relative links, one side-by-side link per budget, in the
    # viewer's own policy labels.
    out = studies / "replication.md"
    assert main(["--studies", str(studies), "--out", str(out), "--resamples", "200"]) == 0
    viewer = studies / PACKING.directory / "viewer.html"
    assert viewer.stat().st_size > 0
    line = next(line for line in out.read_text().splitlines() if line.startswith("Per question, what each policy"))
    assert "(replication_packing/viewer.html)" in line
    assert "[B = 96](replication_packing/viewer.html#compare=packer%3Dsubmod%2C+B%3D96%7C" in line
    assert "[B = 160](" in line
    # A page outside the studies (docs/) links none of their files: it names the viewer and what writes it.
    published = tmp_path / "docs" / "replication.md"
    assert main(["--studies", str(studies), "--out", str(published), "--resamples", "200"]) == 0
    text = published.read_text()
    line = next(line for line in text.splitlines() if line.startswith("Per question, what each policy"))
    assert "](" not in line and f"`{studies.as_posix()}/replication_packing/viewer.html`" in line
    links = re.findall(r"\]\(([^)#]+)", text)
    assert links and all((published.parent / link).is_file() for link in links), links


def test_the_commands_are_the_overrides_the_rows_carry(tmp_path):
    """Runs of the whole grid show the study's command; a 40-question slice of two budgets shows its own
    overrides and how they differ from the study's."""
    import yaml

    def sweep(folder, budgets, extra=()):
        frames = [packing_rows(20, p, b, s, "tiny-135m") for p in ("packed", "submod") for b in budgets for s in (42,)]
        write_sweep(folder, frames)
        for i, frame in enumerate(frames):
            overrides = ["+sweeps=replication_packing", *extra, f"packer={frame.packer[0]}"]
            overrides.append(f"budget={frame.budget[0]}")
            (folder / str(i) / ".hydra").mkdir()
            (folder / str(i) / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([*overrides, "seed=42"]))

    slice_ = tmp_path / "slice"
    sweep(slice_ / PACKING.directory, (96, 160), ["dataset.sample_size=40"])
    text = render(Settings(slice_, tmp_path / "r.md", 200))
    assert PACKING.command_in(slice_) not in text.split("## Seed 000: budgeted packing")[1].split("\n\n    python")[0]
    assert (
        "    python -m harness -m +sweeps=replication_packing dataset.sample_size=40 packer=packed,submod "
        f"budget=96,160 seed=42 hydra.sweep.dir={slice_.as_posix()}/replication_packing\n" in text
    )  # the folder the rows came from, not the default study root
    note = next(x for x in text.splitlines() if x.startswith("The `replication_packing` rows come from 4 runs"))
    assert "`dataset.sample_size=40` added" in note
    assert "`packer=packed,submod` where the study runs `packer=packed,focused,mmr,submod,oracle`" in note
    assert "`budget=96,160` where the study runs `budget=96,128,160,224`" in note
    assert "`seed=42` where the study runs `seed=42,13,7`" in note
    assert f"The whole study: `{PACKING.command_in(slice_)}`." in note

    from harness.report.replication.provenance import made_by, study_grid

    grid = study_grid(PACKING)
    assert grid["packer"] == ["packed", "focused", "mmr", "submod", "oracle"] and grid["+sweeps"] == [
        "replication_packing"
    ]
    whole = tmp_path / "whole"
    folder = whole / PACKING.directory
    combinations = [(p, int(b), int(s)) for p in grid["packer"] for b in grid["budget"] for s in grid["seed"]]
    frames = [packing_rows(2, p, b, s, "tiny-135m") for p, b, s in combinations]
    write_sweep(folder, frames)
    for i, frame in enumerate(frames):
        (folder / str(i) / ".hydra").mkdir()
        overrides = ["+sweeps=replication_packing", f"packer={frame.packer[0]}", f"budget={frame.budget[0]}"]
        overrides.append(f"seed={frame.seed[0]}")
        (folder / str(i) / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    assert made_by(Settings(whole, tmp_path / "w.md", 200), PACKING) == (PACKING.command_in(whole), None)
    assert PACKING.command_in(whole).endswith(f"hydra.sweep.dir={whole.as_posix()}/replication_packing")
    (folder / "0" / "rows.parquet").unlink()  # one job short of the grid
    command, note = made_by(Settings(whole, tmp_path / "w.md", 200), PACKING)
    assert note is not None and "59 of the 60 combinations of these values" in note


def test_one_seed_is_one_seed(tmp_path):
    studies = tmp_path / "studies"
    write_sweep(studies / PACKING.directory, [packing_rows(20, p, 160, 42, "tiny-135m") for p in ("packed", "submod")])
    text = render(Settings(studies, tmp_path / "r.md", 200))
    assert "1 seed (42) of 20 questions (20 distinct)" in text and "| 20 rows (1 seed, 20 distinct questions) |" in text
    assert "1 seeds" not in text


def test_sections_into_a_new_out_write_those_sections(tmp_path):
    studies = tmp_path / "studies"
    write_sweep(studies / TREES.directory, classifier_study_rows())
    out = tmp_path / "new" / "trees.md"
    assert main(["--studies", str(studies), "--out", str(out), "--resamples", "200", "--sections", "trees"]) == 0
    text = out.read_text()
    assert "## Seed 002: RAPTOR vs the query-driven tree" in text and "## Seed 000" not in text
    assert "| seed 002: DTCRS (lm classifier) below RAPTOR on build time (qasper) |" in text
    assert (tmp_path / "new" / "trees" / "trees.png").stat().st_size > 0


def test_the_papers_are_named_beside_their_short_names(tmp_path):
    text = render(Settings(tmp_path / "none", tmp_path / "r.md", 200))
    preamble = text[: text.index("\n## ")]
    assert (
        "| *Recall Is Not Enough: A Reader-Context Diagnostic for Budget-Constrained Retrieval-Augmented "
        "Generation* | seed 000 | Ananto Nayan Bala" in preamble
    )
    assert "| *Finding the Right Balance: Relevance and Diversity in LLM Retrieval* | seed 001 | Guillaume" in preamble
    assert "| *DTCRS: Dynamic Tree Construction for Recursive Summarization* | seed 002 | authors not named" in preamble
    assert "Luo" not in text


def test_a_tree_with_one_fresh_build_gets_no_interval_and_too_few_runs(tmp_path):
    frames = classifier_study_rows()
    frames[0] = frames[0].assign(**{"tree.cached": [False, True, True]})  # RAPTOR built once, read back twice
    studies = tmp_path / "studies"
    write_sweep(studies / TREES.directory, frames)
    text = render(Settings(studies, tmp_path / "r.md", 200))
    row = next(x for x in text.splitlines() if x.startswith("| seed 002: DTCRS (lm classifier) below RAPTOR on build"))
    # DTCRS (lm) 41 s against one RAPTOR build of 100 s: -59%, and no verdict from one build
    assert "| too few runs (3 DTCRS and 1 RAPTOR build; 2 per tree at least) | -59% (no interval) vs paper" in row
    assert "reversed" not in row and "MDE 0%" not in text


def test_settings_name_the_data_file_its_recorded_sha256_and_the_ids_that_chose_its_questions(tmp_path):
    from harness.report.run_sources import data_files

    digest = "837a919903fedf521211c4271f168ad5458488198e9c4d967bf5f3a579525ce8"
    runs = [tmp_path / "0", tmp_path / "1"]
    for run in runs:
        run.mkdir()
        files = [{"key": "path", "path": "/d/dev_subsampled.jsonl", "sha256": digest, "bytes": 3}]
        (run / "summary.json").write_text(json.dumps({"data": {"files": files}}), encoding="utf-8")
    rows = pd.DataFrame(
        {
            "dataset": ["hotpotqa_fork_dev_subsampled"] * 3,
            "qkey": ["a", "b", "b"],
            "cfg.dataset.path": ["/data/anlp-project-multihop/processed_data/hotpotqa/dev_subsampled.jsonl"] * 3,
            "cfg.dataset.question_ids_file": ["/h/harness/data/question_ids/ids_485.txt"] * 3,
            "run_dir": [str(runs[0]), str(runs[1]), str(runs[1])],
        }
    )
    assert (
        data_files(rows) == "`dev_subsampled.jsonl` sha256 `837a919903fe` (2 questions, the ones `ids_485.txt` lists)"
    )
    older = rows.drop(columns=["cfg.dataset.question_ids_file", "run_dir"])
    assert data_files(older) == "`dev_subsampled.jsonl` (2 questions)"
    (runs[1] / "summary.json").write_text("{}", encoding="utf-8")  # a run that predates the record
    assert data_files(rows) == "`dev_subsampled.jsonl` (2 questions, the ones `ids_485.txt` lists)"


def test_the_page_says_the_command_that_made_it(tmp_path):
    text = render(Settings(tmp_path / "studies", tmp_path / "docs" / "replication.md", 200))
    made = f"python -m harness.report replicate --studies {(tmp_path / 'studies').as_posix()} --out "
    assert f"Generated by `{made}{(tmp_path / 'docs' / 'replication.md').as_posix()}`" in text.splitlines()[2]
