"""Answer extraction from verbose generations.

REAL_OUTPUTS are what the offline reader (SmolLM2-135M-Instruct, float32, greedy, default prompt)
actually wrote: 24 shared HotpotQA distractor questions (gold paragraphs plus two distractors, first two
sentences each, max_new_tokens=24) and 8 shared QASPER questions (one gold chunk, max_new_tokens=40).
The expected answers were worked out by hand from the rules in harness/read/answers.py.
"""

from __future__ import annotations

import pytest

from harness.cache import TextStore
from harness.metrics.answers import f1_score
from harness.read.answers import extract_answer
from harness.read.base import PromptRequest
from harness.read.hf import TransformersReader
from harness.read.module import clean_answer
from tests.conftest import REPO

MODELS_DIR = REPO / ".cache" / "models"

# (question id, gold answer, raw generation, expected extracted answer)
REAL_OUTPUTS = [
    (
        "5abdf12255429976d4830a2f",
        "Bob Seger",
        "The Album Against the Wind was the 11th Album of a Rock singer Bob Seger born May ",
        "The Album Against the Wind was the 11th Album of a Rock singer Bob Seger born May",
    ),
    (
        "5ab6d09255429954757d337d",
        "from 1986 to 2013",
        "The football manager who recruited David Beckham managed Manchester United during 1996–97.",
        "The football manager who recruited David Beckham managed Manchester United during 1996–97",
    ),
    (
        "5adbf0a255429947ff17385a",
        "no",
        "No, the Laleli Mosque and Esma Sultan Mansion are not located in the same neighborhood. The Laleli Mosque",
        "No",
    ),
    (
        "5ae2b770554299495565db0f",
        "March and April",
        "The annual documentary film festival, that is presented by the British journal of literary essays, "
        "held in March, is in Le",
        "The annual documentary film festival, that is presented by the British journal of literary essays, "
        "held in March, is in Le",
    ),
    (
        "5abf63f15542997ec76fd3ea",
        "October 1922",
        "Alexander Kerensky was defeated and destroyed by the Bolsheviks in the course of a civil war that "
        "ended when the Pro",
        "Alexander Kerensky was defeated and destroyed by the Bolsheviks in the course of a civil war that "
        "ended when the Pro",
    ),
    (
        "5ae4a3265542995ad6573de5",
        "Fujioka, Gunma",
        "Buck-Tick is a Canadian rock band, not a Japanese band.",
        "Buck-Tick is a Canadian rock band, not a Japanese band",
    ),
    (
        "5a828c8355429966c78a6a50",
        "Henry J. Kaiser",
        "Henry J. Kaiser, the father of modern American shipbuilding, was the founder of Kaiser Ventures, a "
        "Portuguese-",
        "Henry J. Kaiser, the father of modern American shipbuilding, was the founder of Kaiser Ventures, a "
        "Portuguese-",
    ),
    (
        "5ab29c24554299449642c932",
        "yes",
        "No, Giuseppe Verdi and Ambroise Thomas are not both Opera composers. Giuseppe Verdi was",
        "No",
    ),
    (
        "5a84c4135542994c784dda31",
        "no",
        "No, Yingkou and Fuding are not the same level of city. Yingkou is a county",
        "No",
    ),
    ("5ab56e32554299637185c594", "no", "No, 888 7th Avenue and 888 7th Avenue are not used for real", "No"),
    (
        "5ae005b555429942ec259bec",
        "1866",
        'The novel that Lourenço Mutarelli based "Nina" on was published in 2004',
        'The novel that Lourenço Mutarelli based "Nina" on was published in 2004',
    ),
    (
        "5aba7cfe554299232ef4a2fd",
        "Carabao Cup",
        "The 2017–18 Wigan Athletic F.C. season will be a year in which",
        "The 2017–18 Wigan Athletic F.C. season will be a year in which",
    ),
    (
        "5a877e5d5542993e715abf7d",
        "David Weissman",
        "David Weissman: Dominic Sena\n\nThe answer is: Dominic Sena",
        "Dominic Sena",
    ),
    (
        "5a77cb335542997042120b3a",
        "John John Florence",
        "Coco Ho: Coco Malia Camille Hapaikekoa Ho (born 18 October ",
        "Coco Ho: Coco Malia Camille Hapaikekoa Ho (born 18 October",
    ),
    (
        "5ab96ab755429970cfb8eacd",
        "Max Martin, Savan Kotecha and Ilya Salmanzadeh",
        "Ellie Goulding worked with Ilya Salmanzadeh, who is also the co-founder of the",
        "Ellie Goulding worked with Ilya Salmanzadeh, who is also the co-founder of the",
    ),
    (
        "5a8e3ea95542995a26add48d",
        "Greenwich Village, New York City",
        'The director of the romantic comedy "Big Stone Gap" is based in New York City.',
        'The director of the romantic comedy "Big Stone Gap" is based in New York City',
    ),
    (
        "5a85eed75542996432c5713b",
        "Coahuila, Mexico",
        "The descendants of the group of black Indians associated with the Seminole people settled in the "
        "old city of Hyderabad, India.",
        "The descendants of the group of black Indians associated with the Seminole people settled in the "
        "old city of Hyderabad, India",
    ),
    (
        "5abfb3425542990832d3a1c0",
        "The Conversation",
        "The answer is: Andrew Jaspan was the co-founder of the not-for-profit media outlet, The",
        "Andrew Jaspan was the co-founder of the not-for-profit media outlet, The",
    ),
    (
        "5abd259d55429924427fcf1a",
        "yes",
        "No, both Dictyosperma and Huernia are monotypic genera of flowering plant in the palm family,",
        "No",
    ),
    (
        "5a8a3e745542996c9b8d5e70",
        "Arena of Khazan",
        'The adventure in "Tunnels and Trolls" is a game called "Tunnels & Trolls" by',
        'The adventure in "Tunnels and Trolls" is a game called "Tunnels & Trolls" by',
    ),
    (
        "5a8f4c8d554299458435d5a3",
        "more than 70 countries",
        "Scott Parkin has been a vocal critic of Exxonmobil and another corporation that has operations in "
        "how many countries.",
        "Scott Parkin has been a vocal critic of Exxonmobil and another corporation that has operations in "
        "how many countries",
    ),
    (
        "5a713ea95542994082a3e6e4",
        "Apalachees",
        "The answer to the question is: Alvaro Mexia had a diplomatic mission with which tribe of indigenous people?",
        "Alvaro Mexia had a diplomatic mission with which tribe of indigenous people?",
    ),
    (
        "5ae53b545542990ba0bbb23c",
        "Las Vegas Strip in Paradise",
        "The Original Jam Sessions 1969: The Original Jam Sessions 1969 is a 20",
        "The Original Jam Sessions 1969: The Original Jam Sessions 1969 is a 20",
    ),
    (
        "5ae1f4cb554299234fd0436d",
        "276,170 inhabitants",
        "The 122nd SS-Standarte was formed in 2014 in the city of Stras",
        "The 122nd SS-Standarte was formed in 2014 in the city of Stras",
    ),
    # QASPER (long gold answers abbreviated to their opening words)
    (
        "44c4bd6decc86f1091b5fc0728873d9324cdde4e",
        "7000000 pairs of events",
        "The Japanese data is approximately 1.2 GB.",
        "The Japanese data is approximately 1.2 GB.",
    ),  # two periods: not a single sentence-final one
    (
        "86abeff85f3db79cf87a8c993e5e5aa61226dc98",
        "negative, positive",
        'The answer to your question is: The dataset for supervision is labeled as "BIBREF0"',
        'The dataset for supervision is labeled as "BIBREF0"',
    ),
    (
        "1959e0ebc21fafdf1dd20c6ea054161ba7446f61",
        "Clinical text structuring (CTS) is a critical task",
        (
            "The clinical text structuring task is defined as a set of techniques that enable the extraction "
            "of structured data from clinical text, which is a crucial step in the extraction of medical "
            "research data from electronic health records ("
        ),
        (
            "The clinical text structuring task is defined as a set of techniques that enable the extraction "
            "of structured data from clinical text, which is a crucial step in the extraction of medical "
            "research data from electronic health records ("
        ),
    ),
    (
        "dd155f01f6f4a14f9d25afc97504aefdc6d29c13",
        "Quality measures using perplexity and recall",
        (
            "The QRNN models have been compared between various language models, including the original PTB "
            "and WT103 models. The performance of the QRNN models has been evaluated using the recall"
        ),
        (
            "The QRNN models have been compared between various language models, including the original PTB "
            "and WT103 models. The performance of the QRNN models has been evaluated using the recall"
        ),
    ),
    (
        "98b11f70239ef0e22511a3ecf6e413ecb726f954",
        "No",
        (
            "No, they do not use a pretrained NMT model to help generating reviews. Instead, they use a deep "
            "neural network (DNN) to generate reviews, which is a type of a generative"
        ),
        "No",
    ),
    (
        "d4d771bcb59bab4f3eb9026cda7d182eb582027d",
        "Unanswerable",
        (
            "The use of NMT ensures generated reviews stay on topic by using a deep neural network (DNN) to "
            "generate reviews, which is trained to identify relevant content. This process is designed to "
            "avoid stray"
        ),
        (
            "The use of NMT ensures generated reviews stay on topic by using a deep neural network (DNN) to "
            "generate reviews, which is trained to identify relevant content. This process is designed to "
            "avoid stray"
        ),
    ),
    (
        "47726be8641e1b864f17f85db9644ce676861576",
        "We compare this method of bias mitigation",
        (
            "Embedding quality assessment is a critical aspect of any deep learning model. In this context, "
            "embedding quality is assessed using a combination of metrics. The first metric is the loss "
            "function, which is a measure"
        ),
        (
            "Embedding quality assessment is a critical aspect of any deep learning model. In this context, "
            "embedding quality is assessed using a combination of metrics. The first metric is the loss "
            "function, which is a measure"
        ),
    ),
    (
        "cbf1137912a47262314c94d36ced3232d5fa1926",
        "fastText, CWE-LP",
        (
            "Two architectures used in the context of contextual embeddings are:\n\n1. Contextual "
            "Encoder-Decoder (CDE)\n2. Contextual Encoder-Encoder-Decoder (CED"
        ),
        "Contextual Encoder-Decoder (CDE), Contextual Encoder-Encoder-Decoder (CED",
    ),
]


@pytest.mark.parametrize("question_id, gold, raw, expected", REAL_OUTPUTS, ids=[r[0][:10] for r in REAL_OUTPUTS])
def test_real_reader_outputs(question_id, gold, raw, expected):
    assert extract_answer(raw) == expected
    assert clean_answer(raw) == expected  # the module's old name gives the same answer


def test_extraction_changes_scores_only_where_worked_out_by_hand():
    # Of the 32 outputs, four open with a correct "No," and scored 0 when the whole first line was compared
    # with the all-or-nothing "no"; extracted they score 1. One loses: the first line "David Weissman:
    # Dominic Sena" contains the gold answer, but the reader then states "The answer is: Dominic Sena",
    # and the stated answer is what it answered.
    # Scored under HotpotQA's rule, which grades a yes/no gold answer all-or-nothing.
    first_line = [f1_score(raw.strip().splitlines()[0], gold, "hotpotqa") for _, gold, raw, _ in REAL_OUTPUTS]
    extracted = [f1_score(expected, gold, "hotpotqa") for _, gold, _, expected in REAL_OUTPUTS]
    changed = {r[0]: (a, b) for r, a, b in zip(REAL_OUTPUTS, first_line, extracted, strict=False) if a != b}
    assert changed == {
        "5adbf0a255429947ff17385a": (0.0, 1.0),
        "5a84c4135542994c784dda31": (0.0, 1.0),
        "5ab56e32554299637185c594": (0.0, 1.0),
        "98b11f70239ef0e22511a3ecf6e413ecb726f954": (0.0, 1.0),
        "5a877e5d5542993e715abf7d": (pytest.approx(2 / 3), 0.0),  # P = 2/4 ("david weissman dominic sena"), R = 1
    }


@pytest.mark.parametrize(
    "raw, expected",
    [
        # a lead-in line whose answer follows on the next line (first-line cleaning scored F1 0 here)
        ("In the experiments the language models are:\nGPT-2", "GPT-2"),
        ("The models compared are:\n\n- GPT-2\n- **BERT**\n\nBoth are transformers.", "GPT-2, BERT"),
        ("**Answer:**\n\nRome", "Rome"),
        # answer prefixes, anywhere in the text, first one wins
        ("Answer: Paris", "Paris"),
        ("The answer is Paris.", "Paris"),
        ("Final answer: 42", "42"),
        ("The final answer is: 1,024", "1,024"),
        ("Let me check the context. The correct answer is: *Lyon*", "Lyon"),
        ("**The answer is:** Marie Curie", "Marie Curie"),
        ("Answer: Oslo\nAnswer: Bergen", "Oslo"),
        # quotes and emphasis, nested in any order; quotes inside the span stay
        ('"Paris"', "Paris"),
        ('The answer is "Paris".', "Paris"),
        ("\u201cThe Conversation\u201d", "The Conversation"),
        ('"**Hamlet**".', "Hamlet"),
        ('"Hamlet" and "King Lear"', '"Hamlet" and "King Lear"'),
        ("**Paris", "Paris"),  # emphasis cut off by max_new_tokens
        # yes/no replies: only a bare Yes/No that is followed by punctuation or nothing
        ("Yes.", "Yes"),
        ("yes, both are operas", "yes"),
        ("No one knows.", "No one knows"),
        ("Nobel Prize in Physics", "Nobel Prize in Physics"),
        # a single sentence-final period goes, abbreviations keep theirs
        ("Washington, D.C.", "Washington, D.C."),
        # names that open with a number keep it: a numbered marker is stripped only from a list's items
        ("1. FC Köln", "1. FC Köln"),
        ("2. Bundesliga", "2. Bundesliga"),
        ("1899 Hoffenheim", "1899 Hoffenheim"),
        ("The answer is: 1. FC Köln", "1. FC Köln"),
        ("**1. FC Köln**", "1. FC Köln"),
        ("1. FC Köln\n\nThe club plays in Cologne.", "1. FC Köln"),  # one item and a sentence: no list
        ("- Paris", "Paris"),  # a bullet is never part of a name
        # a real numbered list, with or without a lead-in, is the run of its items
        ("1. GPT-2\n2. BERT", "GPT-2, BERT"),
        ("1) GPT-2\n2) **BERT**.\n\nBoth are transformers.", "GPT-2, BERT"),
        ("The clubs are:\n1. 1. FC Köln\n2. Bayern Munich", "1. FC Köln, Bayern Munich"),
        ("The model used is:\n1. GPT-2", "GPT-2"),
        ("Answer:\n1. GPT-2\n2. BERT", "GPT-2, BERT"),
        # a line ending in ':' with nothing after it is kept; empty generations give ""
        ("The answer depends on the context:", "The answer depends on the context:"),
        ("", ""),
        ("  \n\n ", ""),
    ],
)
def test_extraction_rules(raw, expected):
    assert extract_answer(raw) == expected


def cached_reader(tmp_path) -> TransformersReader:
    """A reader whose answers are all in its cache: only its tokenizer loads (to render the keys' prompts)."""
    return TransformersReader(
        name="cached",
        pretrained=str(MODELS_DIR / "SmolLM2-135M-Instruct"),
        offline_model="smollm2",
        models_dir=str(MODELS_DIR),
        dtype="float32",
        cache_dir=str(tmp_path),
        show_progress=False,
    )


def test_cached_answers_are_re_extracted_from_the_raw_generation(tmp_path):
    # An entry written under the old first-line rule replays with the current extraction; no model loads.
    reader = cached_reader(tmp_path)
    lead_in, prefix, answer_only = prompts = [PromptRequest(q, "") for q in ("p-lead-in", "p-prefix", "p-answer-only")]
    store = TextStore(tmp_path / "responses.sqlite", table="responses")
    store.put_texts(
        {
            reader.cache_key(lead_in): {
                "answer": "The language models are:",
                "raw": "The language models are:\nGPT-2",
            },
            reader.cache_key(prefix): {"answer": "The answer is: Oslo", "raw": "The answer is: Oslo"},
            reader.cache_key(answer_only): {"answer": "Bergen"},
        }
    )
    responses = reader.responses([*prompts, prefix])
    assert [r["answer"] for r in responses] == ["GPT-2", "Oslo", "Bergen", "Oslo"]
    assert [r["raw"] for r in responses] == [
        "The language models are:\nGPT-2",
        "The answer is: Oslo",
        "Bergen",
        "The answer is: Oslo",
    ]
    assert reader.answer(prompts) == ["GPT-2", "Oslo", "Bergen"]
    assert (reader.generated, reader.requested) == (0, 7)


def test_a_malformed_cache_entry_names_its_key(tmp_path):
    reader = cached_reader(tmp_path)
    key = reader.cache_key(PromptRequest("p", ""))
    TextStore(tmp_path / "responses.sqlite", table="responses").put_texts({key: {"text": "Paris"}})
    with pytest.raises(ValueError, match=key):
        reader.answer([PromptRequest("p", "")])
