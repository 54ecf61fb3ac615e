"""Randomly initialised stand-ins for models no PyPI package ships (their scores are never reported)."""

from __future__ import annotations

import re
from pathlib import Path


def tiny_llmlingua2_classifier(parent: Path, text: str) -> str:
    """A 1-layer BERT token classifier over the words of ``text``, saved in a folder whose name carries a
    backbone llmlingua accepts (it picks its word-merging rule from the model path)."""
    import torch
    from transformers import BertConfig, BertForTokenClassification, BertTokenizer

    folder = parent / "tiny-bert-base-multilingual-cased"
    words = sorted(set(re.findall(r"\w+|[^\w\s]", text.lower())))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    BertTokenizer(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=512,
        num_labels=2,
    )
    BertForTokenClassification(config).save_pretrained(folder)
    return str(folder)
