"""Checkers for chapter 15: the LoRA forward pass and the assistant-only loss mask."""
from __future__ import annotations

import math

import torch

from minitfm.exercises._core import Case, CheckResult, Mistake, randn, run_cases
from minitfm.finetuning.chat import CHAT_SPECIAL_TOKENS, IGNORE_INDEX, ChatTemplate
from minitfm.text.words import WordTokenizer


def _lora(x, weight, a, b, alpha, r, scale=None):
    scale = alpha / r if scale is None else scale
    return x @ weight.T + scale * (x @ a.T) @ b.T  # (.., in) -> (.., out), plus the low-rank path


def check_lora_forward(lora_forward, verbose: bool = True) -> CheckResult:
    """Check ``lora_forward(x, weight, A, B, alpha, r) -> y``: ``y = x W^T + (alpha / r) (x A^T) B^T``.

    ``x`` (..., in), ``weight`` (out, in) frozen, ``A`` (r, in), ``B`` (out, r); no bias.
    """
    mistakes = [
        Mistake("you left out the frozen weight: LoRA adds its update to W x, it does not replace it",
                lambda i: _lora(i["x"], torch.zeros_like(i["weight"]), i["A"], i["B"], i["alpha"], i["r"])),
        Mistake("you scaled the update by alpha; LoRA scales it by alpha / r, so that changing the rank does not "
                "change the update's size", lambda i: _lora(**_args(i), scale=i["alpha"])),
        Mistake("you scaled the update by r / alpha; it is alpha / r", lambda i: _lora(**_args(i), scale=i["r"] / i["alpha"])),
        Mistake("you scaled by alpha / sqrt(r): that is rsLoRA (Kalajdzievski, 2023), not the LoRA of Hu et al.",
                lambda i: _lora(**_args(i), scale=i["alpha"] / math.sqrt(i["r"]))),
        Mistake("you forgot the scale alpha / r", lambda i: _lora(**_args(i), scale=1.0)),
    ]
    specs = [("x (2, 3, 8), out 6, r = 2, alpha = 4", (2, 3, 8), 6, 2, 4.0, 1),
             ("one vector x (8,), r = 4, alpha = 16", (8,), 5, 4, 16.0, 2),
             ("r = 1, alpha = 1 (scale 1)", (3, 8), 4, 1, 1.0, 3),
             ("B = 0, as LoRA initialises it: the output is exactly the frozen layer's", (2, 8), 6, 2, 8.0, 4)]
    cases = []
    for what, shape, out, r, alpha, seed in specs:
        def make(shape=shape, out=out, r=r, alpha=alpha, seed=seed, zero=(seed == 4)):
            d_in = shape[-1]
            b = torch.zeros(out, r) if zero else randn(out, r, seed=seed + 30)
            return {"x": randn(*shape, seed=seed), "weight": randn(out, d_in, seed=seed + 10),
                    "A": randn(r, d_in, seed=seed + 20), "B": b, "alpha": alpha, "r": r}
        cases.append(Case(what, make, _lora(**_args(make())), mistakes))
    return run_cases("check_lora_forward", lora_forward, cases, verbose=verbose)


def _args(i):
    return {"x": i["x"], "weight": i["weight"], "a": i["A"], "b": i["B"], "alpha": i["alpha"], "r": i["r"]}


WORDS = "what is two plus three five sort one four the answer yes no hello".split()
_TEMPLATE = ChatTemplate(WordTokenizer(WORDS + list(CHAT_SPECIAL_TOKENS)))


def _labels(ids, spans, *, role_token=False, end_token=True, roles=("assistant",), fill=IGNORE_INDEX):
    labels = [fill] * len(ids)
    for span in spans:
        if span.role in roles:
            start = span.start if role_token else span.content_start
            stop = span.stop if end_token else span.stop - 1
            labels[start:stop] = ids[start:stop]
    return torch.tensor(labels)


def check_loss_mask(assistant_labels, verbose: bool = True) -> CheckResult:
    """Check ``assistant_labels(ids, spans) -> labels``: the ids of every assistant reply, its end-of-turn token
    included, and -100 everywhere else (aligned with ``ids``; the one-token shift happens later, in the batch).

    ``ids`` is a list of ints (a rendered conversation); ``spans`` a list of
    :class:`minitfm.finetuning.TurnSpan` (``role``, ``start`` = the role token, ``content_start``, ``stop`` = one
    past the end-of-turn token). Return a list or a 1-D tensor.
    """
    mistakes = [
        Mistake("you left out the end-of-turn token: a model never trained to write <|end|> never stops talking",
                lambda i: _labels(i["ids"], i["spans"], end_token=False)),
        Mistake("you included the role token <|assistant|>: the template writes it, the model never has to predict "
                "it (at generation time it is already in the prompt)",
                lambda i: _labels(i["ids"], i["spans"], role_token=True)),
        Mistake("you kept the user's and system's turns too: that is training on the whole sequence, the baseline "
                "this mask is measured against", lambda i: _labels(i["ids"], i["spans"], roles=("assistant", "user",
                                                                                                "system"))),
        Mistake("you returned the ids themselves: that is training on the whole sequence, the baseline this mask is "
                "measured against; keep only the assistant's replies", lambda i: torch.tensor(i["ids"])),
        Mistake("you filled the masked positions with 0, a real token id; use -100, the index the loss ignores",
                lambda i: _labels(i["ids"], i["spans"], fill=0)),
        Mistake("you shifted the labels by one; keep them aligned with the ids (labels[i] is the target at "
                "position i), the batch shifts them", lambda i: torch.cat([_labels(i["ids"], i["spans"])[1:],
                                                                            torch.tensor([IGNORE_INDEX])])),
    ]
    conversations = [
        ("one question, one answer", [{"role": "user", "content": "what is two plus three"},
                                      {"role": "assistant", "content": "five"}]),
        ("a system turn first", [{"role": "system", "content": "the answer"},
                                 {"role": "user", "content": "sort four one"},
                                 {"role": "assistant", "content": "one four"}]),
        ("two assistant replies", [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hello"},
                                   {"role": "user", "content": "yes"}, {"role": "assistant", "content": "no yes"}]),
        ("a reply with no words (only the end-of-turn token)", [{"role": "user", "content": "no"},
                                                                {"role": "assistant", "content": ""}]),
    ]
    cases = []
    for what, conversation in conversations:
        def make(c=conversation):
            rendered = _TEMPLATE.render(c)
            return {"ids": rendered.ids.tolist(), "spans": list(rendered.spans)}
        cases.append(Case(what, make, _TEMPLATE.render(conversation).labels, mistakes,
                          normalize=lambda got: torch.as_tensor(got) if isinstance(got, list) else got))
    return run_cases("check_loss_mask", assistant_labels, cases, verbose=verbose)
