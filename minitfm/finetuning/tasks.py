"""Five small tasks whose answers a program can check: the instruction-tuning data of chapter 15.

Every task has *facts* (what is true: ``17 + 25`` is ``42``), written two ways:

- as plain **statements** for pretraining (``"17 + 25 = 42."``): the base model reads them as text;
- as **questions** in a chat, asked with one of the task's **templates** (``"What is 17 + 25?"``), whose reply
  is the bare answer (``"42"``).

Supervised fine-tuning then teaches the *format*: answer the question, briefly, and stop. Whether the model
knows the fact is a matter of pretraining. The facts of each task are split in two by a fixed hash, so the
split is the same on every machine: ``"train"`` facts are asked during fine-tuning, ``"heldout"`` facts never
are. Each task also keeps its last template out of fine-tuning, so a held-out fact asked with the held-out
template is new in both ways: generalisation, not memory.

======================  ===============================================================  ==================
task                    question (first template)                                        answer
======================  ===============================================================  ==================
``add``                 What is 17 + 25?                                                 42
``count``               How many r are in strawberry?                                    3
``sort``                Sort these digits: 5 2 9                                         2 5 9
``acronym``             What does KV stand for?                                          key-value
``translate``           What is attention in Chinese?  /  What is 注意力 in English?     注意力 / attention
======================  ===============================================================  ==================

Everything here is written by the project: the words, the acronyms and their expansions, the templates; the
English-Chinese term pairs come from the book's own glossary (``assets/glossary_pairs.json``, written from
``book/glossary.md`` by :func:`glossary_pairs_from` when the base model was pretrained, and frozen since: a test
checks that every pair is still in the glossary).
"""
from __future__ import annotations

import itertools
import json
import random
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

from minitfm._checks import check_choice, check_number, check_positive_int

TASKS = ("add", "count", "sort", "acronym", "translate")
SPLITS = ("train", "heldout")
HELDOUT_SHARE = 0.2  # of each task's facts, chosen by a hash of the question's content
GLOSSARY_PAIRS = Path(__file__).parent / "assets" / "glossary_pairs.json"

TEMPLATES = {  # the last template of each task is never used in fine-tuning
    "add": ("What is {a} + {b}?", "Compute {a} + {b}.", "{a} plus {b} is how much?", "Add {a} and {b}."),
    "count": ("How many {letter} are in {word}?", "Count the letter {letter} in {word}.",
              "In {word}, how many times does {letter} appear?", "How often is {letter} in the word {word}?"),
    "sort": ("Sort these digits: {digits}", "Put in order: {digits}", "Order from small to large: {digits}",
             "Arrange {digits} in increasing order."),
    "acronym": ("What does {short} stand for?", "Expand {short}.", "What is {short} short for?",
                "Spell out the abbreviation {short}."),
    "translate": ("What is {term} in {language}?", "Translate {term} into {language}.",
                  "Say {term} in {language}.", "Give the {language} word for {term}."),
}
STATEMENTS = {  # how pretraining text states a fact
    "add": "{a} + {b} = {answer}.",
    "count": "The letter {letter} appears in {word} {answer} times.",
    "sort": "{digits} sorted is {answer}.",
    "acronym": "{short} stands for {answer}.",
    "translate": "{term} in {language} is {answer}.",
}

WORDS = ("strawberry apple banana cherry letter little pepper coffee bottle yellow mirror window matter "
         "attention token tensor vector matrix model layer weight query key value head mask cache batch "
         "softmax gradient sample decoder encoder english chinese sentence grammar paper summer winter "
         "rabbit button kitten hammer dollar pillow tomorrow balloon accessory committee success assessment "
         "bookkeeper parallel sequence embedding merriment mississippi").split()

ACRONYMS = {  # the book's abbreviations and what they stand for
    "KV": "key-value", "FFN": "feed-forward network", "MoE": "mixture of experts", "LoRA": "low-rank adaptation",
    "SFT": "supervised fine-tuning", "BPE": "byte-pair encoding", "RoPE": "rotary position embedding",
    "GQA": "grouped-query attention", "MQA": "multi-query attention", "MHA": "multi-head attention",
    "LM": "language model", "LLM": "large language model", "GPU": "graphics processing unit",
    "CPU": "central processing unit", "NLP": "natural language processing", "RNN": "recurrent neural network",
    "MLP": "multi-layer perceptron", "ViT": "vision transformer", "BOS": "beginning of sequence",
    "EOS": "end of sequence", "RMS": "root mean square", "ALiBi": "attention with linear biases",
    "GELU": "Gaussian error linear unit", "ReLU": "rectified linear unit", "SGD": "stochastic gradient descent",
    "AMP": "automatic mixed precision", "DDP": "distributed data parallel", "FSDP": "fully sharded data parallel",
    "BLEU": "bilingual evaluation understudy", "TP": "tensor parallelism",
}


@dataclass(frozen=True)
class Example:
    """One question: its ``task``, the ``template`` index it was asked with, the ``prompt`` text, the expected
    ``answer`` (the whole reply), and the fact's ``split``. ``value`` is the fact's own answer where the reply
    restates it (``"The letter a appears in cabab 2 times."`` holds ``"2"``), empty where the reply *is* the value."""

    task: str
    template: int
    prompt: str
    answer: str
    split: str
    value: str = ""

    @property
    def fact_answer(self) -> str:
        """What a guess that ignores the question must hit: ``value``, or ``answer`` when the reply is the value."""
        return self.value or self.answer

    def chat(self, with_answer: bool = True) -> list[dict]:
        """The conversation: the user's question and, with ``with_answer``, the assistant's reply."""
        turns = [{"role": "user", "content": self.prompt}]
        return turns + [{"role": "assistant", "content": self.answer}] if with_answer else turns


def glossary_pairs_from(markdown: str) -> list[list[str]]:
    """[English, Chinese] pairs of the glossary page ``book/glossary.md``: every entry whose English term is
    letters, spaces and hyphens and whose Chinese name (before any bracket or comma) is 2-6 Chinese
    characters, in the page's order."""
    if not isinstance(markdown, str) or "```{glossary}" not in markdown:
        raise ValueError("markdown must be the text of book/glossary.md, with its ```{glossary} block")
    body = markdown[markdown.index("```{glossary}"):]
    pairs = []
    for english, chinese in re.findall(r"\n\n([^\s][^\n]*)\n([^\s][^\n]*)\n  ", body):
        chinese = re.split(r"[（(，,、/]", chinese)[0].strip()
        if re.fullmatch(r"[\u4e00-\u9fff]{2,6}", chinese) and re.fullmatch(r"[A-Za-z][A-Za-z -]{1,24}", english):
            pairs.append([english, chinese])
    return pairs


def glossary_pairs() -> list[tuple[str, str]]:
    """(English, Chinese) term pairs from the book's glossary."""
    return [tuple(p) for p in json.loads(GLOSSARY_PAIRS.read_text(encoding="utf-8"))]


def facts(task: str) -> list[dict]:
    """Every fact of ``task`` as a dict of its template fields and ``answer``, in a fixed order."""
    check_choice(task, "task", TASKS)
    if task == "add":
        return [dict(a=a, b=b, answer=str(a + b)) for a in range(30) for b in range(30)]
    if task == "count":
        return [dict(word=w, letter=c, answer=str(w.count(c))) for w in WORDS for c in sorted(set(w))]
    if task == "sort":
        shuffle = random.Random("sort")  # one fixed order for each set of four digits
        fours = [shuffle.sample(c, 4) for c in itertools.combinations(range(10), 4)]
        lists = itertools.chain(itertools.permutations(range(10), 3), fours)
        return [dict(digits=" ".join(map(str, d)), answer=" ".join(map(str, sorted(d)))) for d in lists]
    if task == "acronym":
        return [dict(short=s, answer=long) for s, long in ACRONYMS.items()]
    pairs = glossary_pairs()
    return ([dict(term=en, language="Chinese", answer=zh) for en, zh in pairs]
            + [dict(term=zh, language="English", answer=en) for en, zh in pairs])


def split_of(task: str, fact: dict) -> str:
    """``"heldout"`` for about HELDOUT_SHARE of a task's facts, by a hash that is the same on every machine."""
    key = json.dumps([task, sorted((k, str(v)) for k, v in fact.items())], ensure_ascii=False)
    return "heldout" if zlib.crc32(key.encode()) % 1000 < HELDOUT_SHARE * 1000 else "train"


def statements(task: str) -> list[str]:
    """Every fact of ``task`` as a pretraining sentence (both splits: the base model may know them all)."""
    return [STATEMENTS[task].format(**f) for f in facts(task)]


def statement_prefix(task: str, fact: dict) -> tuple[str, str]:
    """A fact's statement cut before its answer, and what must follow: ``("17 + 25 = ", "42.")``. A base model
    that continues the prefix with the rest *knows* the fact in the form it was pretrained on."""
    check_choice(task, "task", TASKS)
    statement = STATEMENTS[task].format(**fact)
    head, _, tail = STATEMENTS[task].partition("{answer}")
    prefix = head.format(**fact)
    return prefix, statement[len(prefix):]


def examples(task: str, split: str, n: int, *, seed: int, templates: str = "train") -> list[Example]:
    """``n`` questions of ``task`` about facts of ``split``, drawn with replacement by a seeded generator.

    ``templates="train"`` asks each with one of the task's fine-tuning templates, ``"heldout"`` with its last
    template only (never seen in fine-tuning)."""
    check_choice(task, "task", TASKS)
    check_choice(split, "split", SPLITS)
    check_choice(templates, "templates", SPLITS)
    check_positive_int(n, "n")
    check_number(seed, "seed", integer=True)
    pool = [f for f in facts(task) if split_of(task, f) == split]
    last = len(TEMPLATES[task]) - 1
    choices = range(last) if templates == "train" else [last]
    rng = random.Random(f"{task}/{split}/{templates}/{seed}")  # str seeds hash the same on every machine
    out = []
    for _ in range(n):
        fact, t = rng.choice(pool), rng.choice(choices)
        out.append(Example(task, t, TEMPLATES[task][t].format(**fact), fact["answer"], split))
    return out


ANSWER_SHAPES = {  # what an answer looks like, right or wrong: the format fine-tuning teaches
    "add": r"\d{1,3}", "count": r"\d", "sort": r"\d( \d){2,3}", "acronym": r"[A-Za-z][A-Za-z -]{1,40}",
    "translate/Chinese": r"[\u4e00-\u9fff]{1,8}", "translate/English": r"[A-Za-z][A-Za-z -]{1,30}",
}


def looks_like_answer(example: Example, reply: str) -> bool:
    """Whether ``reply`` has the shape of an answer to ``example``, right or wrong: digits for a sum, a list of
    digits for a sort, Chinese characters for a term asked in Chinese, and nothing else (no question, no
    sentence, no run-on text)."""
    if not isinstance(example, Example):
        raise TypeError(f"example must be an Example, got {type(example).__name__}")
    if not isinstance(reply, str):
        raise TypeError(f"reply must be a str, got {type(reply).__name__}")
    key = example.task
    if key == "translate":
        key += "/Chinese" if re.search(r"[\u4e00-\u9fff]", example.answer) else "/English"
    return re.fullmatch(ANSWER_SHAPES[key], reply.strip()) is not None


def is_correct(example: Example, reply: str) -> bool:
    """The check: the reply, stripped of surrounding spaces, is exactly the answer."""
    if not isinstance(example, Example):
        raise TypeError(f"example must be an Example, got {type(example).__name__}")
    if not isinstance(reply, str):
        raise TypeError(f"reply must be a str, got {type(reply).__name__}")
    return reply.strip() == example.answer
