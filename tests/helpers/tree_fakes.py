"""Deterministic stand-ins for the tree tests: a chat LM, a bag-of-words encoder and topic documents.

Used by the tree tests and, as a ``_target_``, by the configs they compose.
"""

from __future__ import annotations

import re

import numpy as np
from sklearn.feature_extraction.text import HashingVectorizer

from harness.core.types import Candidate, Document, Example, Pool

TOPICS = {
    "cats": "cat kitten whiskers purr meow fur paws litter feline tabby claws nap",
    "markets": "stock bond market price investor dividend trading equity broker yield shares fund",
    "rockets": "rocket launch orbit engine thrust booster payload fuel nozzle stage capsule altitude",
}


class FakeChatLM:
    """Answers every prompt type the trees send, deterministically, and records what it was asked.

    Summaries are the first word of each context paragraph plus its length, so a summary depends on
    exactly which children it summarises. Counts like a real backend with no cache: ``calls`` one per
    prompt, ``prompt_tokens`` its whitespace words.
    """

    identity = "fake-chat-lm"

    def __init__(
        self,
        question_class: str = "abstractive",
        subquestions: list[str] | None = None,
        toc: str = "1. Cats\n2. Markets\n3. Rockets",
    ) -> None:
        self.question_class = question_class
        self.subquestions = (
            subquestions
            if subquestions is not None
            else [
                "What do cats do with their whiskers and fur?",
                "How do stock markets pay a dividend to an investor?",
                "How does a rocket engine produce thrust for launch?",
            ]
        )
        self.toc = toc
        self.prompts: list[str] = []
        self.calls = 0
        self.prompt_tokens = 0

    def continuation_logprobs(self, prompt, continuations):
        """The reply naming ``question_class`` scores 0, every other -5 (one call, as a real scorer's)."""
        self.calls += 1
        self.prompt_tokens += len(prompt.split())
        self.prompts.append(prompt)
        wanted = self.question_class.replace("yes_no", "yes/no")
        return [[0.0] if reply == wanted else [-5.0] for reply in continuations]

    def chat(self, prompts, max_new_tokens):
        out = []
        for prompt in prompts:
            self.calls += 1
            self.prompt_tokens += len(prompt.split())
            self.prompts.append(prompt)
            if prompt.startswith("Classify the question"):
                out.append(self.question_class)
            elif "Write a table of contents" in prompt:
                out.append(self.toc)
            elif prompt.startswith("Table of contents of a document"):
                out.append("\n".join(f"{i + 1}. {q}" for i, q in enumerate(self.subquestions)))
            else:
                context = prompt.split(":", 1)[1]
                paragraphs = [p.split() for p in context.split("\n\n") if p.split()]
                words = [p[0] for p in paragraphs]
                topic_words = [w for p in paragraphs for w in p[1:4]]
                out.append(f"summary of {len(paragraphs)} parts: " + " ".join(words + topic_words))
        return out


class BagOfWordsEncoder:
    """Hashed bag-of-words vectors, L2-normalised: texts that share words are similar."""

    identity = "bag-of-words-256"

    def __init__(self, dim: int = 256) -> None:
        self.vectorizer = HashingVectorizer(
            n_features=dim, alternate_sign=False, norm=None, token_pattern=r"(?u)\b\w+\b"
        )
        self.calls = 0

    def encode(self, texts):
        self.calls += len(texts)
        if not len(texts):
            return np.zeros((0, self.vectorizer.n_features), dtype=np.float32)
        x = self.vectorizer.transform(list(texts)).toarray().astype(np.float32)
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)

    encode_documents = encode_queries = encode


class WordTokens:
    """A TokenCounter stand-in counting whitespace words."""

    name = "test-words"

    def count(self, text):
        return len(text.split())

    def count_many(self, texts):
        return [len(t.split()) for t in texts]

    def truncate(self, text, max_tokens):
        return " ".join(text.split()[: max(0, max_tokens)])


def topic_documents(
    per_topic: int = 6, seed: int = 0, words: int = 30, doc_prefix: str = "doc"
) -> tuple[Document, ...]:
    """Chunks of a 'document' whose parts are about three topics, in blocks of ``per_topic``."""
    rng = np.random.default_rng(seed)
    docs = []
    for topic, vocab in TOPICS.items():
        vocab = vocab.split()
        for _ in range(per_topic):
            text = " ".join(rng.choice(vocab, size=words))
            i = len(docs)
            docs.append(Document(doc_id=f"{doc_prefix}::chunk{i:03d}", title="", sentences=(f"{topic} {text}.",)))
    return tuple(docs)


def make_long_pool(
    question: str = "How does a rocket engine produce thrust?",
    documents=None,
    qid: str = "q1",
    qtype: str = "abstractive",
    encoder=None,
    gold=(),
    keep=None,
) -> Pool:
    """A question over ``documents`` (default: topic_documents()) and its dense pool, ranked by cosine."""
    documents = documents if documents is not None else topic_documents()
    encoder = encoder or BagOfWordsEncoder()
    example = Example(
        question_id=qid,
        question=question,
        answers=("thrust",),
        gold_doc_ids=tuple(gold),
        documents=documents,
        hops=len(gold),
        qtype=qtype,
    )
    query = encoder.encode_queries([question])[0]
    vectors = encoder.encode_documents([d.text for d in documents])
    scores = vectors @ query
    order = np.argsort(-scores, kind="stable")
    if keep is not None:
        order = order[:keep]
    candidates = [
        Candidate(
            documents[i].doc_id,
            documents[i].text,
            (documents[i].doc_id,),
            sentences=documents[i].sentences,
            score=float(scores[i]),
        )
        for i in order
    ]
    return Pool(example, candidates, vectors[order], query)


def tokens_of(text: str) -> list[str]:
    return re.findall(r"\w+", text)
