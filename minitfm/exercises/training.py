"""Checkers for the training inputs and loss: the shifted decoder input and the label-smoothed loss."""
from __future__ import annotations

import torch

from minitfm.data import shift_right
from minitfm.exercises._core import Case, CheckResult, Mistake, randn, run_cases
from minitfm.training.losses import label_smoothed_cross_entropy


def check_shift_right(shift_right_fn, verbose: bool = True) -> CheckResult:
    """Check ``shift_right(tgt_out, bos_id) -> tgt_in`` (B, T), same dtype, input left unchanged.

    ``tgt_in`` starts with ``bos_id`` and continues with ``tgt_out`` without its last column:
    [y1, y2, ..., yn] -> [BOS, y1, ..., y(n-1)].
    """
    mistakes = [
        Mistake("nothing is shifted: the decoder would read the token it must predict (teacher forcing reads "
                "the target shifted right by one)", lambda i: i["tgt_out"].clone()),
        Mistake("you shifted left: BOS goes first, then the targets without their last token",
                lambda i: torch.cat([i["tgt_out"][:, 1:], torch.full_like(i["tgt_out"][:, :1], i["bos_id"])], 1)),
        Mistake("you put BOS first but kept every target, so the result is one column too long; drop the last "
                "column", lambda i: torch.cat([torch.full_like(i["tgt_out"][:, :1], i["bos_id"]), i["tgt_out"]], 1)),
        Mistake("the first column must be bos_id for every row; yours is the first target",
                lambda i: torch.cat([i["tgt_out"][:, :1], i["tgt_out"][:, :-1]], 1)),
    ]

    def case(what, rows, bos, dtype=torch.long):
        make = lambda: {"tgt_out": torch.tensor(rows, dtype=dtype), "bos_id": bos}  # noqa: E731
        return Case(what, make, shift_right(make()["tgt_out"], bos), mistakes)

    cases = [
        case("two rows, BOS=1", [[5, 6, 7, 2], [8, 9, 2, 0]], 1),
        case("a batch of 1, length 1", [[7]], 1),
        case("BOS=3, odd length 5", [[4, 5, 6, 7, 2], [4, 2, 0, 0, 0], [9, 9, 9, 9, 9]], 3),
        case("int32 ids stay int32", [[5, 6, 2]], 1, dtype=torch.int32),
    ]
    return run_cases("check_shift_right", shift_right_fn, cases, verbose=verbose)


def _smoothed(logits, target, smoothing, ignore_index, *, others=False, keep_pad=False, reduce="mean"):
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    nll = -log_probs.gather(-1, target.clamp(min=0)[..., None])[..., 0]
    v = logits.shape[-1]
    if others:  # the other convention: 1 - eps on the right id, eps / (V - 1) on each other id
        uniform = (-log_probs.sum(-1) - nll) / (v - 1)
    else:
        uniform = -log_probs.mean(dim=-1)
    loss = (1 - smoothing) * nll + smoothing * uniform
    keep = torch.ones_like(target, dtype=torch.bool) if keep_pad else target != ignore_index
    if reduce == "sum":
        return loss[keep].sum()
    if reduce == "all":
        return loss[keep].sum() / target.numel()
    return loss[keep].mean()


def check_label_smoothed_loss(loss_fn, verbose: bool = True) -> CheckResult:
    """Check ``loss_fn(logits, target, smoothing, ignore_index) -> scalar tensor``.

    logits (..., V), target (...) integer ids. The smoothed target puts 1 - smoothing on the right id plus
    smoothing spread evenly over all V ids (as ``F.cross_entropy(label_smoothing=...)``); positions whose
    target is ``ignore_index`` do not count, and the loss is the mean over the positions that count.
    """
    mistakes = [
        Mistake("you spread the smoothing over the V - 1 wrong ids; this book (and F.cross_entropy's "
                "label_smoothing) spreads it over all V ids", lambda i: _smoothed(*i.values(), others=True)),
        Mistake("padding counts in your loss: positions whose target is ignore_index must be left out",
                lambda i: _smoothed(*i.values(), keep_pad=True)),
        Mistake("you divide by every position, padding included; average over the positions that count",
                lambda i: _smoothed(*i.values(), reduce="all")),
        Mistake("you return the sum; the loss is the mean over the positions that count",
                lambda i: _smoothed(*i.values(), reduce="sum")),
        Mistake("the smoothing is ignored: your loss is plain cross-entropy",
                lambda i: _smoothed(i["logits"], i["target"], 0.0, i["ignore_index"])),
    ]

    def case(what, shape, v, smoothing, seed, pad_positions=(), ignore_index=-100):
        def make():
            target = torch.randint(0, v, shape, generator=torch.Generator().manual_seed(seed))
            for pos in pad_positions:
                target[pos] = ignore_index
            return {"logits": randn(*shape, v, seed=seed) * 2, "target": target, "smoothing": smoothing,
                    "ignore_index": ignore_index}
        i = make()
        return Case(what, make, label_smoothed_cross_entropy(*i.values()), mistakes, atol=1e-5)

    cases = [
        case("logits (2, 5, 7), smoothing 0.1, two padded positions", (2, 5), 7, 0.1, seed=1,
             pad_positions=((0, 4), (1, 3))),
        case("smoothing 0 is plain cross-entropy", (3, 4), 5, 0.0, seed=2),
        case("logits (6, 11) without a time axis, smoothing 0.3, ignore_index=0 as padding", (6,), 11, 0.3,
             seed=3, pad_positions=((5,),), ignore_index=0),
        case("one position, V=2, smoothing 0.5", (1, 1), 2, 0.5, seed=4),
    ]
    return run_cases("check_label_smoothed_loss", loss_fn, cases, verbose=verbose)
