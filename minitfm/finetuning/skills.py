"""Four procedures with many instances, each checked by a program: what the assistant of chapter 15 learns to do.

A *skill* is a rule, not a list: its instances are drawn fresh from a seeded generator, so a model can only
answer a new one by carrying out the procedure.

==========  ==========================================  ==========  ===========================================
task        question (first template)                   answer      the pretraining statement of the same fact
==========  ==========================================  ==========  ===========================================
``sort``    Sort these digits: 5 2 9                    2 5 9       5 2 9 sorted is 2 5 9.
``reverse`` Reverse the letters of cbdaf.               fadbc       cbdaf reversed is fadbc.
``count``   How many a are in cabab?                    (below)     The letter a appears in cabab 2 times.
``add``     What is 47 + 38?                            85          47 + 38 = 85.
==========  ==========================================  ==========  ===========================================

The assistant replies with the answer alone, except for ``count`` (:data:`REPLIES`): there the reply is the
statement itself, ``The letter a appears in cabab 2 times.``. The base model counts at the end of that sentence,
where pretraining taught it to. Asked for the bare number right after the question, it did not: tuned on count
alone (3000 questions, 3 epochs), bare-number replies were right on 34% of held-out questions (39% of the trained
ones), restated ones on 98% (``benchmarks/README.md``). The reply states the question's letter and word again before the
number, the way a person answering in a full sentence does.

The designs keep a constant reply weak (chapter 15 prints the best constant reply beside every accuracy):
``count`` draws its answer uniformly from 0-3 and then builds a string with that many copies of the letter, so
no answer is right more than about a quarter of the time; sums of two two-digit numbers spread over 20-198.

Every instance has a split, ``"train"`` or ``"heldout"``, by a hash of its question's content (the same on every
machine): fine-tuning asks only ``"train"`` instances, the chapter scores ``"heldout"`` ones. Pretraining reads
statements of both (the base model may know any fact; what fine-tuning must teach is to *answer*), and each task
keeps its last question template out of fine-tuning.
"""
from __future__ import annotations

import random
import zlib

from minitfm._checks import check_choice, check_number, check_positive_int
from minitfm.finetuning.tasks import Example

SKILLS = ("sort", "reverse", "count", "add")
SPLITS = ("train", "heldout")
HELDOUT_SHARE = 0.2
LETTERS = "abcdefghijklmnop"  # reverse draws from these; count from the first eight

TEMPLATES = {  # the last template of each task is never used in fine-tuning
    "sort": ("Sort these digits: {q}", "Put in order: {q}", "Order from small to large: {q}",
             "Arrange {q} in increasing order."),
    "reverse": ("Reverse the letters of {q}.", "Write {q} backwards.", "What is {q} reversed?",
                "Spell {q} from the last letter to the first."),
    "count": ("How many {letter} are in {word}?", "Count the letter {letter} in {word}.",
              "In {word}, how many times does {letter} appear?", "How often is {letter} in {word}?"),
    "add": ("What is {a} + {b}?", "Compute {a} + {b}.", "{a} plus {b} is how much?", "Add {a} and {b}."),
}
STATEMENTS = {
    "sort": "{q} sorted is {answer}.",
    "reverse": "{q} reversed is {answer}.",
    "count": "The letter {letter} appears in {word} {answer} times.",
    "add": "{a} + {b} = {answer}.",
}
REPLIES = {"count": STATEMENTS["count"]}  # the tasks whose reply restates the question (the others: the answer)
ANSWER_SHAPES = {"sort": r"\d( \d){2,4}", "reverse": r"[a-p]{3,6}", "count": r"\d", "add": r"\d{2,3}"}


def draw(task: str, rng: random.Random) -> dict:
    """One instance of ``task``: its template fields and ``answer``, drawn from ``rng``."""
    check_choice(task, "task", SKILLS)
    if task == "sort":  # 3-5 distinct digits
        digits = rng.sample(range(10), rng.randint(3, 5))
        return dict(q=" ".join(map(str, digits)), answer=" ".join(map(str, sorted(digits))))
    if task == "reverse":
        word = "".join(rng.choice(LETTERS) for _ in range(rng.randint(3, 6)))
        return dict(q=word, answer=word[::-1])
    if task == "count":  # the answer first, uniform over 0-3, then a word of 4-8 letters holding it that often
        n, letter = rng.randint(0, 3), rng.choice(LETTERS[:8])
        word = [letter] * n + [rng.choice(LETTERS[:8].replace(letter, "")) for _ in range(rng.randint(4, 8) - n)]
        rng.shuffle(word)
        return dict(letter=letter, word="".join(word), answer=str(n))
    a, b = rng.randint(10, 99), rng.randint(10, 99)
    return dict(a=a, b=b, answer=str(a + b))


def answer_of(task: str, fields: dict) -> str:
    """The answer the task's rule gives for a question's fields (sort and reverse: ``q``; count: ``letter`` and
    ``word``; add: ``a`` and ``b``): what :func:`draw` stores as ``answer``, computed from the question alone."""
    check_choice(task, "task", SKILLS)
    if task == "sort":
        return " ".join(sorted(fields["q"].split()))
    if task == "reverse":
        return fields["q"][::-1]
    if task == "count":
        return str(fields["word"].count(fields["letter"]))
    return str(fields["a"] + fields["b"])


def ask(task: str, **fields) -> Example:
    """One question of ``task`` about the given fields, in its first template, with the reply the rule gives:
    ``ask("add", a=25, b=17)`` asks "What is 25 + 17?" and expects "42"."""
    fact = {**fields, "answer": answer_of(task, fields)}
    reply = reply_text(task, fact)
    return Example(task, 0, TEMPLATES[task][0].format(**fact), reply, split_of(task, fact),
                   fact["answer"] if reply != fact["answer"] else "")


def split_of(task: str, fact: dict) -> str:
    """``"heldout"`` for about HELDOUT_SHARE of the instances, by a hash of the question's fields."""
    key = repr([task] + sorted((k, str(v)) for k, v in fact.items() if k != "answer"))
    return "heldout" if zlib.crc32(key.encode()) % 1000 < HELDOUT_SHARE * 1000 else "train"


def instances(task: str, split: str, n: int, *, seed: int) -> list[dict]:
    """``n`` instances of ``task`` from ``split`` (drawn until that many fall in it; repeats allowed)."""
    check_choice(split, "split", SPLITS)
    check_positive_int(n, "n")
    check_number(seed, "seed", integer=True)
    rng, out = random.Random(f"{task}/{split}/{seed}"), []  # a str seed hashes the same on every machine
    while len(out) < n:
        fact = draw(task, rng)
        if split_of(task, fact) == split:
            out.append(fact)
    return out


def statement(task: str, fact: dict) -> str:
    """The fact as a pretraining sentence: ``"47 + 38 = 85."``."""
    check_choice(task, "task", SKILLS)
    return STATEMENTS[task].format(**fact)


def statement_prefix(task: str, fact: dict) -> tuple[str, str]:
    """The statement cut before its answer, and what must follow: ``("47 + 38 = ", "85.")``."""
    text = statement(task, fact)
    prefix = STATEMENTS[task].partition("{answer}")[0].format(**fact)
    return prefix, text[len(prefix):]


def reply_text(task: str, fact: dict) -> str:
    """The assistant's reply to a question about ``fact``: the answer, or for the tasks of :data:`REPLIES` the
    sentence that restates the question with the answer in it."""
    check_choice(task, "task", SKILLS)
    return REPLIES[task].format(**fact) if task in REPLIES else fact["answer"]


def examples(task: str, split: str, n: int, *, seed: int, templates: str = "train") -> list[Example]:
    """``n`` questions of ``task`` about instances of ``split``; ``templates="train"`` asks each with one of the
    fine-tuning templates (drawn), ``"heldout"`` with the task's last template. Each example's ``answer`` is the
    whole reply (:func:`reply_text`), its ``value`` the fact's answer where the two differ."""
    check_choice(templates, "templates", SPLITS)
    rng, last = random.Random(f"{task}/{split}/{templates}/{seed}/templates"), len(TEMPLATES[task]) - 1
    out = []
    for fact in instances(task, split, n, seed=seed):
        t = rng.randrange(last) if templates == "train" else last
        reply = reply_text(task, fact)
        out.append(Example(task, t, TEMPLATES[task][t].format(**fact), reply, split,
                           fact["answer"] if reply != fact["answer"] else ""))
    return out
