"""METEOR (Banerjee & Lavie, 2005) on nltk's matching stages, with the hand-off between stages corrected.

METEOR aligns the hypothesis' words to the reference's in three stages, each over the words the earlier
stages left unmatched: exact forms, Porter stems, WordNet synonyms. With ``m`` matches, precision
``P = m / len(hypothesis)``, recall ``R = m / len(reference)`` and ``chunks`` runs of matches adjacent
in both sentences (nltk's parameters alpha = 0.9, beta = 3, gamma = 0.5):

    Fmean = P * R / (alpha * P + (1 - alpha) * R)      (10PR / (R + 9P))
    penalty = gamma * (chunks / m) ** beta
    score = Fmean * (1 - penalty)

nltk's ``single_meteor_score`` (3.10) hands the stem stage's leftovers to the synonym stage as *stems*
(``_enum_stem_match`` returns the stemmed lists), so WordNet is asked about "automobil" rather than
"automobile" and a synonym whose stem differs from its surface form never matches:
``single_meteor_score(["automobile"], ["car"])`` is 0.0 although nltk's own ``wordnetsyn_match`` pairs
the two words. :func:`align` runs nltk's three stages and gives the synonym stage the surface forms of
the words still unmatched; the chunk count and the score formula are nltk's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from nltk.stem.porter import PorterStemmer
from nltk.translate import meteor_score as _nltk

ALPHA, BETA, GAMMA = 0.9, 3.0, 0.5
STAGES = ("exact", "stem", "synonym")
_STEMMER = PorterStemmer()


def align(hypothesis: Sequence[str], reference: Sequence[str], wordnet: Any = None) -> list[tuple[int, int, str]]:
    """(hypothesis position, reference position, stage) of every match, by hypothesis position. Words are
    lower-cased, as nltk's default preprocessing does."""
    if wordnet is None:
        from nltk.corpus import wordnet
    hyp = [w.lower() for w in hypothesis]
    ref = [w.lower() for w in reference]
    exact, hyp_left, ref_left = _nltk._match_enums(list(enumerate(hyp)), list(enumerate(ref)))
    stem, hyp_left, ref_left = _nltk._enum_stem_match(hyp_left, ref_left, stemmer=_STEMMER)
    # The correction: the synonym stage sees the unmatched words as written, not their stems.
    hyp_left = [(i, hyp[i]) for i, _ in hyp_left]
    ref_left = [(j, ref[j]) for j, _ in ref_left]
    synonym, _, _ = _nltk._enum_wordnetsyn_match(hyp_left, ref_left, wordnet=wordnet)
    staged = [(i, j, stage) for stage, pairs in zip(STAGES, (exact, stem, synonym), strict=True) for i, j in pairs]
    return sorted(staged)


def single_meteor(reference: Sequence[str], hypothesis: Sequence[str], wordnet: Any = None) -> float:
    """METEOR of a tokenised hypothesis against one tokenised reference (0.0 when nothing matches)."""
    matches = align(hypothesis, reference, wordnet)
    if not matches:
        return 0.0
    m = len(matches)
    precision, recall = m / len(hypothesis), m / len(reference)
    fmean = precision * recall / (ALPHA * precision + (1 - ALPHA) * recall)
    chunks = _nltk._count_chunks([(i, j) for i, j, _ in matches])
    return fmean * (1 - GAMMA * (chunks / m) ** BETA)


def meteor_score(references: Iterable[Sequence[str]], hypothesis: Sequence[str], wordnet: Any = None) -> float:
    """The best METEOR over the references, as nltk's ``meteor_score`` takes it (0.0 without references)."""
    return max((single_meteor(ref, hypothesis, wordnet) for ref in references if ref), default=0.0)
