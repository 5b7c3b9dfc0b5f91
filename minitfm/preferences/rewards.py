"""Verifiable rewards: a program scores a reply to one of the assistant's questions, 1.0 or 0.0.

Every reward takes ``(reply, example)``: the reply's text (what the model wrote before its end-of-turn token)
and the :class:`~minitfm.finetuning.tasks.Example` it answers (chapter 15's tasks in
:mod:`minitfm.finetuning.tasks`, its skills in :mod:`minitfm.finetuning.skills`, the people's facts in
:mod:`minitfm.finetuning.people`).

=========================  ==================================================================================
reward                     1.0 when
=========================  ==================================================================================
:func:`exact_answer`       the reply, stripped of surrounding spaces, is the answer (chapter 15's check)
:func:`answer_format`      the reply has the *shape* of an answer to that task, right or wrong (digits for a
                           sum, a list of digits for a sort, one word for a town)
:func:`contains_answer`    **wrong on purpose**: the answer appears anywhere in the reply (see its docstring)
:func:`integer_or_pass`    **wrong on purpose**: the reply equals the answer as an integer, *or* is not an
                           integer at all (an ``except: pass`` that falls through; see its docstring)
=========================  ==================================================================================

A model's reply may be anything (empty, run-on text, another task's answer): that earns 0.0, never an error.
What the *caller* passes wrong (a reply that is not a str, something that is not an Example, an example of an
unknown task or with an empty answer) is refused with a clear error, since a reward that silently scores
malformed input as 0 hides a bug in the training loop.

Why verifiable rewards: a program that checks the answer cannot be flattered, and costs nothing per sample,
which is why DeepSeek-R1 and the RL courses train on math and code. But a verifier is a specification: what
it accepts is what the policy will learn to write, of what the policy samples: :func:`integer_or_pass` is the
proof on the book's assistant, and :func:`contains_answer`, which pays replies the assistant never writes, shows
that a loose check is hacked only where the policy can reach what it overpays.
"""
from __future__ import annotations

import re

from minitfm.finetuning import skills, tasks
from minitfm.finetuning.people import ATTRIBUTES
from minitfm.finetuning.tasks import Example

__all__ = ["REWARDS", "exact_answer", "answer_format", "contains_answer", "integer_or_pass", "check_reply"]

# the shapes of an answer, per task name: chapter 15's tasks and skills share names ("add", "sort", "count"),
# so a name admits either module's shape
_SKILL_SHAPES = {name: [skills.ANSWER_SHAPES[name]] for name in skills.SKILLS}
_PEOPLE_SHAPE = r"[A-Za-z][A-Za-z-]{1,20}"  # one word: a town, a job, a pet


def check_reply(reply, example) -> str:
    """Refuse what a caller must never pass: returns ``example``'s task name (``"add"``, ``"people/city"``)."""
    if not isinstance(example, Example):
        raise TypeError(f"example must be a minitfm.finetuning.tasks.Example, got {type(example).__name__}")
    if not isinstance(reply, str):
        raise TypeError(f"reply must be a str (the text the model wrote), got {type(reply).__name__}; decode the "
                        "ids first (ChatTemplate.reply)")
    if not isinstance(example.answer, str) or not example.answer.strip():
        raise ValueError(f"example.answer must be a non-empty str, got {example.answer!r}: with an empty answer "
                         "every reply would contain it")
    task = example.task
    known = set(tasks.TASKS) | set(skills.SKILLS) | {f"people/{a}" for a in ATTRIBUTES}
    if task not in known:
        raise ValueError(f"example.task must be one of {sorted(known)}, got {task!r}")
    return task


def exact_answer(reply: str, example: Example) -> float:
    """1.0 if ``reply.strip() == example.answer``, else 0.0: the strict verifier (chapter 15's ``is_correct``)."""
    check_reply(reply, example)
    return float(tasks.is_correct(example, reply))


def answer_format(reply: str, example: Example) -> float:
    """1.0 if the reply has the shape of an answer to the example's task, right or wrong, else 0.0.

    A format reward alone teaches the shape, not the answer; added to the exact reward it pays for the shape
    even when the answer is wrong, and a policy can farm that part (keep its weight small, or pay it only to
    right answers)."""
    task = check_reply(reply, example)
    text = reply.strip()
    if task.startswith("people/"):
        shapes = [_PEOPLE_SHAPE]
    else:
        shapes = _SKILL_SHAPES.get(task, [])
        if task in tasks.TASKS:
            if tasks.looks_like_answer(example, text):
                return 1.0
    return float(any(re.fullmatch(s, text) for s in shapes))


def contains_answer(reply: str, example: Example) -> float:
    """**A sloppy verifier, wrong on purpose**, kept for chapter 16's failure: 1.0 if the answer appears
    *anywhere* in the reply.

    It looks harmless: a right answer contains itself, and it forgives a reply such as "The answer is 42".
    But it rewards any reply that happens to contain the answer's characters: on "What is 1 + 2?" the reply
    "12 13 14 15" earns 1.0 (it contains "3"), and so does "0123456789". A policy that samples such replies is
    paid for them: longer replies that string many digits together hit the answer more often. The survey's
    probe hacked it on the book's first assistant (0.47M parameters, task ``count``: 3 of 3 seeds within 13 s);
    today's assistant ends its sums after two or three digits and almost never samples a longer reply, so on its
    own samples this verifier pays almost exactly what :func:`exact_answer` pays, and GRPO finds nothing to hack
    (chapter 16 measures both, and hacks :func:`integer_or_pass` instead). The fix is a verifier that accepts
    the answer and nothing else."""
    check_reply(reply, example)
    return float(example.answer in reply)


def integer_or_pass(reply: str, example: Example) -> float:
    """**A sloppy verifier, wrong on purpose**, kept for chapter 16's failure: compare the reply with the answer as
    integers, and pay 1.0 when the reply is not an integer at all.

    The bug is one line that looks careful::

        try:
            if int(reply) != int(answer):
                return 0.0
        except ValueError:
            pass  # "not a number: leave the format to another reward"
        return 1.0

    A wrong number earns 0.0 and the right one 1.0, so on a model that answers with numbers it pays what
    :func:`exact_answer` pays. But a reply that ``int`` cannot parse falls through the ``except`` to the success
    return: "14f 7 8", "12a", "145 146" and the empty reply all earn 1.0. A policy trained on it learns to write
    junk, its reward rising while its exact accuracy falls to zero (chapter 16 measures it, and what a KL penalty
    does). It is meant for numeric answers; on any other task it pays every reply that is not an integer. The fix
    is to refuse what cannot be parsed (return 0.0 in the ``except``), or :func:`exact_answer`."""
    check_reply(reply, example)
    try:
        if int(reply) != int(example.answer):
            return 0.0
    except ValueError:
        pass  # the bug: an unparsable reply falls through to the success return
    return 1.0


REWARDS = {"exact_answer": exact_answer, "answer_format": answer_format, "contains_answer": contains_answer,
           "integer_or_pass": integer_or_pass}
