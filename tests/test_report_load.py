import logging

import numpy as np
import pandas as pd
import pytest

from harness.report.load import (
    annotate,
    discover_runs,
    hyperparameter_columns,
    load_runs,
    policy_components,
)


def write_run(directory, frame):
    directory.mkdir(parents=True)
    frame.to_parquet(directory / "rows.parquet", index=False)
    (directory / "summary.json").write_text("{}")


def rows(diversifier="knn", lam=None, reader="r1", seed=1, budget=64, cache="/a", questions=("q0", "q1")):
    frame = pd.DataFrame(
        {
            "question_id": list(questions),
            "dataset": "d",
            "tree": "none",
            "diversifier": diversifier,
            "packer": "packed",
            "retriever": "minilm",
            "perturb": "none",
            "reader": reader,
            "k": 5,
            "budget": budget,
            "seed": seed,
            "f1": [0.5, 1.0][: len(questions)],
            "cfg.seed": seed,
            "cfg.diversifier.name": diversifier,
            "cfg.reader.pretrained": f"/models/{reader}",
            "cfg.paths.cache_dir": cache,
            "cfg.dataset.sample_size": None,
        }
    )
    if lam is not None:
        frame["cfg.diversifier.lambda_"] = lam
    return frame


def test_discover_sweep_skips_failed_and_unfinished_jobs(tmp_path, caplog):
    sweep = tmp_path / "sweep"
    for job in (0, 1, 10, 2):
        write_run(sweep / str(job), rows(seed=job))
    (sweep / "3").mkdir()
    (sweep / "3" / "error.txt").write_text("boom")
    (sweep / "4").mkdir()
    write_run(sweep / "report" / "0", rows())  # a report folder is never read as a run
    with caplog.at_level(logging.WARNING):
        found = discover_runs([sweep, sweep / "1"])  # a job given again is loaded once
    assert [p.name for p in found] == ["0", "1", "2", "10"]
    assert any("3" in m and "error.txt" in m for m in caplog.messages)
    assert any("unfinished" in m for m in caplog.messages)
    with pytest.raises(FileNotFoundError, match="not a directory"):
        discover_runs([tmp_path / "nowhere"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no rows.parquet"):
        discover_runs([tmp_path / "empty"])


def test_load_runs_types_and_summary(tmp_path, caplog):
    write_run(tmp_path / "a", rows())
    (tmp_path / "b").mkdir()
    rows(diversifier="mmr", lam=0.5).to_parquet(tmp_path / "b" / "rows.parquet")
    with caplog.at_level(logging.WARNING):
        frame, infos = load_runs([tmp_path / "a", tmp_path / "b"])
    assert [info.summary is not None for info in infos] == [True, False]
    assert any("summary.json" in m for m in caplog.messages)
    assert len(frame) == 4 and set(frame["run_dir"]) == {str(tmp_path / "a"), str(tmp_path / "b")}
    assert frame["cfg.dataset.sample_size"].isna().all()
    assert frame["cfg.diversifier.lambda_"].dtype == float
    assert frame["qkey"].tolist() == ["q0", "q1", "q0", "q1"]


def test_policy_columns_are_components_and_free_hyperparameters():
    frame = pd.concat(
        [
            rows("knn", reader="r1", cache="/a"),
            rows("knn", reader="r2", cache="/b"),
            rows("mmr", 0.3, reader="r1"),
            rows("mmr", 0.7, reader="r1", seed=2),
        ],
        ignore_index=True,
    )
    frame["qkey"] = frame["question_id"]
    # lambda_ varies within mmr; the pretrained path only follows the reader; cache_dir is a runtime key
    assert hyperparameter_columns(frame, ["diversifier", "reader"]) == ["cfg.diversifier.lambda_"]
    annotated, layout = annotate(frame)
    # each component is followed by its own hyper-parameters; one a policy lacks is left out of its label
    assert layout.policy == ("diversifier", "cfg.diversifier.lambda_", "reader")
    assert layout.conditions == ("reader",) and layout.context == ("diversifier", "cfg.diversifier.lambda_")
    assert layout.settings == ("budget",)
    assert list(annotated["policy"].cat.categories) == [
        "diversifier=knn, reader=r1",
        "diversifier=knn, reader=r2",
        "diversifier=mmr, diversifier.lambda_=0.3, reader=r1",
        "diversifier=mmr, diversifier.lambda_=0.7, reader=r1",
    ]
    components = policy_components(annotated, layout)
    assert components.loc["diversifier=mmr, diversifier.lambda_=0.7, reader=r1", "cfg.diversifier.lambda_"] == 0.7
    assert np.isnan(components.iloc[0]["cfg.diversifier.lambda_"])


def test_repeated_rows_from_two_directories_are_dropped(tmp_path, caplog):
    write_run(tmp_path / "a", rows())
    write_run(tmp_path / "copy", rows(cache="/elsewhere"))
    frame, _ = load_runs([tmp_path / "a", tmp_path / "copy"])
    with caplog.at_level(logging.WARNING):
        annotated, layout = annotate(frame)
    assert len(annotated) == 2 and layout.policy == ()
    assert set(annotated["run_dir"]) == {str(tmp_path / "a")}
    assert any("repeat" in m for m in caplog.messages)
