"""Checkers for chapters 15 and 15b: the LoRA forward pass, the assistant-only loss mask, the last real token and
mean pooling."""
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


def _mean_pool(hidden, key_mask, *, over_all=False, last=False):
    if last:  # the last column, whatever it holds
        return hidden[:, -1]
    real = torch.ones_like(key_mask) if over_all else key_mask
    weights = real.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1)


def check_mean_pooling(mean_pool, verbose: bool = True) -> CheckResult:
    """Check ``mean_pool(hidden, key_mask) -> pooled``: each row's mean over its real tokens.

    ``hidden`` (B, T, D) float, ``key_mask`` (B, T) bool (``True`` = a real token, ``False`` = padding, on either
    side); return (B, D), what ``DecoderClassifier(..., pooling="mean")`` reads.
    """
    mistakes = [
        Mistake("you averaged over every column, the padding too: a padded row's vector then depends on how much "
                "padding its batch needed", lambda i: _mean_pool(i["hidden"], i["key_mask"], over_all=True)),
        Mistake("you summed the real tokens without dividing by their number: a longer text gets a larger vector",
                lambda i: (i["hidden"] * i["key_mask"].unsqueeze(-1)).sum(dim=1)),
        Mistake("you divided the sum of the real tokens by T, the padded length, not by each row's own count",
                lambda i: (i["hidden"] * i["key_mask"].unsqueeze(-1)).sum(dim=1) / i["hidden"].shape[1]),
        Mistake("you took the last column: that is last-token pooling, and for a padded row it is a pad token",
                lambda i: _mean_pool(i["hidden"], i["key_mask"], last=True)),
    ]
    lengths = [("no padding", (2, 4, 3), [[4, 0], [4, 0]]),
               ("right padding of different lengths", (3, 5, 4), [[5, 0], [2, 0], [3, 0]]),
               ("left padding", (2, 6, 3), [[6, 0], [2, 4]]),
               ("one real token in a padded row", (2, 4, 2), [[1, 0], [4, 0]])]
    cases = []
    for seed, (what, shape, rows) in enumerate(lengths, start=1):
        def make(shape=shape, rows=rows, seed=seed):
            return {"hidden": randn(*shape, seed=seed), "key_mask": _masks(rows, shape[1])}
        inputs = make()
        cases.append(Case(what, make, _mean_pool(inputs["hidden"], inputs["key_mask"]), mistakes))
    return run_cases("check_mean_pooling", mean_pool, cases, verbose=verbose)


def _masks(rows, length):
    """(B, T) bool masks from (n_real, start) per row."""
    key_mask = torch.zeros(len(rows), length, dtype=torch.bool)
    for b, (n, start) in enumerate(rows):
        key_mask[b, start:start + n] = True
    return key_mask


def check_last_token_index(last_token_index, verbose: bool = True) -> CheckResult:
    """Check ``last_token_index(key_mask) -> index``: the column of each row's last real token.

    ``key_mask`` (B, T) bool, ``True`` = a real token, padding on either side; return (B,) integer columns, the
    vector a last-token classifier reads is ``hidden[arange(B), index]``.
    """
    t_minus_1 = lambda i: torch.full((i["key_mask"].shape[0],), i["key_mask"].shape[1] - 1)
    mistakes = [
        Mistake("you took the last column for every row: for a right-padded row that is a pad token", t_minus_1),
        Mistake("you counted the real tokens and subtracted one: right only when the padding is on the right; with "
                "left padding the last real token is the last column", lambda i: i["key_mask"].sum(dim=1) - 1),
        Mistake("you found the first real token, not the last", lambda i: i["key_mask"].long().argmax(dim=1)),
        Mistake("you counted the real tokens without subtracting one: that is one past the last real token",
                lambda i: i["key_mask"].sum(dim=1)),
    ]
    specs = [("no padding", [[5, 0], [5, 0]], 5),
             ("right padding of different lengths", [[6, 0], [2, 0], [4, 0]], 6),
             ("left padding", [[3, 3], [6, 0]], 6),
             ("one real token in a row", [[1, 0], [1, 4], [5, 0]], 5)]
    cases = []
    for what, rows, length in specs:
        def make(rows=rows, length=length):
            return {"key_mask": _masks(rows, length)}
        expected = torch.tensor([start + n - 1 for n, start in rows])
        cases.append(Case(what, make, expected, mistakes,
                          normalize=lambda got: torch.as_tensor(got).long()))
    return run_cases("check_last_token_index", last_token_index, cases, verbose=verbose)
