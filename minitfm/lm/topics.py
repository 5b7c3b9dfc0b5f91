"""A classification task built from the book's own prose: which part of the book a paragraph comes from.

Glossary: C classes (the topics), N examples per class.

Each paragraph of the base model's prose corpus (:func:`minitfm.lm.prose.prose_paragraphs`) carries the
notebook it comes from. Four topics group the chapters:

==============  ================================================================
topic           chapters
==============  ================================================================
``attention``   1 attention, 2 masks, 3 multi-head attention
``the model``   4 positions, 5 norms and the FFN, 6 the whole Transformer
``training``    7 training, 7b training recipes, 10 debugging
``generation``  8 the KV cache, 9 sampling
==============  ================================================================

Paragraphs of other sources (the book's pages, the other chapters) belong to no topic and are left out. Each
paragraph is assigned once to ``"train"`` or ``"test"`` by a hash of its text (one in ``TEST_EVERY``, a half), so the
held-out set is the same on every machine; :func:`topic_examples` takes the same number from each topic
(balanced classes, so the best constant answer scores ``1 / C``), in an order fixed by the same kind of hash, and
cuts each paragraph to its first ``n_bytes`` bytes (:func:`~minitfm.lm.prose.cut_to_bytes`).

The base model read most of these paragraphs in pretraining (all but one in ten), never with a label: what it
learned about them is what a classifier on top of it can use.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import PurePosixPath

from minitfm._checks import check_choice, check_positive_int
from minitfm.lm.prose import cut_to_bytes, prose_paragraphs

TOPICS = {  # topic -> the notebooks (file stems) whose paragraphs belong to it
    "attention": ("01_attention", "02_masks", "03_multi_head"),
    "the model": ("04_positions", "05_norms_ffn", "06_whole_transformer"),
    "training": ("07_training", "07b_training_recipes", "10_debugging"),
    "generation": ("08_kv_cache", "09_sampling"),
}
SPLITS = ("train", "test")
TEST_EVERY = 2  # one paragraph in two (by a hash of its text) is held out for testing
MIN_BYTES = 64  # shorter paragraphs (a caption, a one-line list item) are left out


@dataclass(frozen=True)
class TopicExample:
    """One paragraph's start, its topic's index in ``TOPICS`` (the class id) and the notebook it comes from."""
    text: str
    label: int
    source: str

    @property
    def topic(self) -> str:
        return list(TOPICS)[self.label]


def topic_of(source: str) -> str | None:
    """The topic of a source path (``"notebooks/02_masks.ipynb"`` -> ``"attention"``), ``None`` for the others."""
    if not isinstance(source, str):
        raise TypeError(f"source must be a path (str), got {type(source).__name__}")
    stem = PurePosixPath(source).stem
    return next((topic for topic, stems in TOPICS.items() if stem in stems), None)


def _hash(paragraph: str) -> int:
    return zlib.crc32(b"topics:" + paragraph.encode("utf-8"))  # a salt: independent of prose.is_heldout


def split_of(paragraph: str) -> str:
    """``"test"`` for one paragraph in ``TEST_EVERY`` (by a hash of its text), else ``"train"``."""
    if not isinstance(paragraph, str):
        raise TypeError(f"paragraph must be a str, got {type(paragraph).__name__}")
    return "test" if _hash(paragraph) % TEST_EVERY == 0 else "train"


def topic_paragraphs(split: str, paragraphs=None) -> dict[str, list[tuple[str, str]]]:
    """topic -> its (source, paragraph) pairs of ``split`` with at least ``MIN_BYTES`` bytes, in hash order.

    ``paragraphs``: (source, paragraph) pairs, by default the base model's prose corpus."""
    check_choice(split, "split", SPLITS)
    if paragraphs is None:
        paragraphs = prose_paragraphs()
    out = {topic: [] for topic in TOPICS}
    for source, paragraph in paragraphs:
        topic = topic_of(source)
        if topic is not None and len(paragraph.encode("utf-8")) >= MIN_BYTES and split_of(paragraph) == split:
            out[topic].append((source, paragraph))
    return {topic: sorted(pairs, key=lambda pair: _hash(pair[1])) for topic, pairs in out.items()}


def topic_examples(split: str, per_class: int, *, n_bytes: int = 96, paragraphs=None) -> list[TopicExample]:
    """``per_class`` examples of every topic from ``split`` (C * per_class in all, grouped by class), each the
    paragraph's first ``n_bytes`` bytes. The same on every machine; a topic with too few paragraphs is an error."""
    check_positive_int(per_class, "per_class")
    check_positive_int(n_bytes, "n_bytes")
    out = []
    for label, (topic, pairs) in enumerate(topic_paragraphs(split, paragraphs).items()):
        if len(pairs) < per_class:
            raise ValueError(f"topic {topic!r} has {len(pairs)} {split} paragraphs of at least {MIN_BYTES} bytes, "
                             f"fewer than per_class={per_class}")
        out += [TopicExample(cut_to_bytes(p, n_bytes), label, source) for source, p in pairs[:per_class]]
    return out


def best_constant_accuracy(labels) -> float:
    """The accuracy of always answering the most common class: the floor a classifier must beat."""
    labels = list(labels)
    if not labels:
        raise ValueError("labels must not be empty")
    return max(labels.count(y) for y in set(labels)) / len(labels)
