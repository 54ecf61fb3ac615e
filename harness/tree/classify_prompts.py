"""The prompts that ask an LM for a question's class (DTCRS's first step), by name (``tree.classify_prompt``).

``zero_shot`` describes the four classes; ``few_shot`` adds two example questions per class. The examples are
written for this prompt about invented papers and stories: none is a question of QASPER, QuALITY or
NarrativeQA, so a classifier scored on those sets never sees its own test questions.
"""

from __future__ import annotations

_CLASSES = """Classify the question about a document into exactly one type:
extractive - the answer is a short span copied from the document (a name, a number, a term, a phrase);
abstractive - the answer must be written in new words, combining or explaining several parts of the document;
yes/no - the answer is yes or no;
unanswerable - the document cannot answer the question."""

_REPLY = "Reply with the type only: extractive, abstractive, yes/no or unanswerable."

ZERO_SHOT = f"""{_CLASSES}

Question: {{question}}

{_REPLY}"""

# Two per class, in an order that never puts a class's examples side by side (a small LM copies the last label).
EXAMPLES = (
    ("Which optimiser do the authors train the parser with?", "extractive"),
    ("How does the proposed encoder deal with words it has never seen?", "abstractive"),
    ("Do the authors release their annotated corpus?", "yes/no"),
    ("What was the first author's undergraduate thesis about?", "unanswerable"),
    ("How many sentences does the test set contain?", "extractive"),
    ("Why does the attention baseline fail on long inputs, according to the analysis?", "abstractive"),
    ("Is the speech model evaluated on more than one language?", "yes/no"),
    ("What did the reviewers of the paper think of the second experiment?", "unanswerable"),
)

FEW_SHOT = (
    f"{_CLASSES}\n\nExamples:\n"
    + "\n".join(f"Question: {question}\nType: {label}" for question, label in EXAMPLES)
    + f"\n\nQuestion: {{question}}\n\n{_REPLY}"
)

CLASSIFY_PROMPTS = {"zero_shot": ZERO_SHOT, "few_shot": FEW_SHOT}


def classify_prompt(name: str) -> str:
    """The prompt named ``name``; ValueError naming the choices otherwise."""
    if name not in CLASSIFY_PROMPTS:
        raise ValueError(f"classify_prompt must be one of {tuple(CLASSIFY_PROMPTS)}, got {name!r}")
    return CLASSIFY_PROMPTS[name]
