"""DTCRS's question classifier by likelihood: the LM scores each class's name as its reply to the
classification prompt and the most likely class decides, so every question is decided by the LM. Checked on
the real offline SmolLM2-135M against a brute-force scoring: each reply token's log-probability read off a
forward pass over the context and the reply's tokens before it, one pass per token."""

from __future__ import annotations

import pytest

from harness.data.qasper import load_qasper
from harness.tree.questions import CLASS_REPLIES, CLASSIFY_PROMPT, QUESTION_CLASSES, classify_question
from tests.conftest import SHARED_DATA

QASPER = SHARED_DATA / "qasper" / "qasper-original-sample.json"


@pytest.fixture(scope="module")
def smollm2():
    from harness.backends.offline_models import default_folder, ensure_offline_model
    from harness.lm.local import LocalChatLM

    folder = ensure_offline_model("smollm2", default_folder("smollm2"))
    return LocalChatLM(pretrained=str(folder), offline_model="smollm2", dtype="float32", torch_threads=1)


def brute_force_scores(lm, question: str) -> dict[str, float]:
    import torch

    tokenizer, model = lm.tokenizer, lm.model
    context = tokenizer(lm.render(CLASSIFY_PROMPT.format(question=question)), add_special_tokens=False)["input_ids"]
    scores = {}
    for label in QUESTION_CLASSES:
        reply = tokenizer(CLASS_REPLIES[label], add_special_tokens=False)["input_ids"]
        # One unpadded, uncached forward of prompt and reply: the logits at position p score token p + 1, as a
        # causal model sees only what precedes it (no batch, padding or KV cache as the classifier uses).
        with torch.inference_mode():
            logits = model(input_ids=torch.tensor([context + reply])).logits[0].float()
        logprobs = torch.log_softmax(logits[len(context) - 1 : -1], dim=-1)
        scores[label] = float(sum(logprobs[i, token] for i, token in enumerate(reply)))
    return scores


@pytest.mark.slow
def test_the_likelihood_classifier_decides_every_question_as_a_brute_force_scoring_does(smollm2):
    questions = [e.question for e in load_qasper(QASPER, chunk_tokens=500)][:4]
    for question in questions:
        decided = classify_question(question, smollm2, "lm", by="likelihood", score="sum")
        assert decided.source == "lm" and decided.decided_by == "likelihood" and decided.lm_parsed is None
        expected = brute_force_scores(smollm2, question)
        assert decided.label == max(QUESTION_CLASSES, key=lambda c: expected[c])
        shown = dict(part.split("=") for part in decided.raw.split())
        for label in QUESTION_CLASSES:
            assert float(shown[label]) == pytest.approx(expected[label], abs=1e-3)


@pytest.mark.slow
def test_per_token_scores_divide_by_the_reply_length(smollm2):
    question = "Which datasets do the authors evaluate on?"
    logprobs = smollm2.continuation_logprobs(CLASSIFY_PROMPT.format(question=question), list(CLASS_REPLIES.values()))
    means = {c: sum(lp) / len(lp) for c, lp in zip(QUESTION_CLASSES, logprobs, strict=True)}
    decided = classify_question(question, smollm2, "lm", by="likelihood", score="per_token")
    assert decided.label == max(QUESTION_CLASSES, key=lambda c: means[c])


def test_an_lm_that_cannot_score_names_the_two_ways_out():
    class Generating:
        name = "llama.cpp"

        def chat(self, prompts, max_new_tokens):
            return ["abstractive"] * len(prompts)

    with pytest.raises(ValueError, match=r"tree.classifier_lm.*tree.classify_by=generation"):
        classify_question("Why?", Generating(), "lm", by="likelihood")
    assert classify_question("Why?", Generating(), "lm", by="generation").decided_by == "generation"
