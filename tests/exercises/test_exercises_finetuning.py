"""The checkers of chapters 15 and 15b (the LoRA forward pass, the assistant-only loss mask, the last real token, mean
pooling) accept a correct function and
name each typical mistake. ``CASES`` joins ``tests/exercises/test_exercises.py``'s shared table."""
import math

import torch

from minitfm import exercises as ex
from minitfm.finetuning import LoRALinear


def lora_ok(x, weight, a, b, alpha, r):
    return x @ weight.T + (alpha / r) * (x @ a.T) @ b.T


def assistant_labels(ids, spans, *, start="content_start", end_offset=0):
    """The labels of the assistant turns from ``span.<start>`` to ``span.stop - end_offset``, -100 elsewhere."""
    labels = [-100] * len(ids)
    for span in spans:
        if span.role == "assistant":
            first, stop = getattr(span, start), span.stop - end_offset
            labels[first:stop] = ids[first:stop]
    return labels


def labels_ok(ids, spans):
    return assistant_labels(ids, spans)


def labels_no_end(ids, spans):
    return assistant_labels(ids, spans, end_offset=1)


def labels_with_role(ids, spans):
    return assistant_labels(ids, spans, start="start")


CASES = {
    "check_lora_forward": (lora_ok, [
        (lambda x, w, a, b, alpha, r: (alpha / r) * (x @ a.T) @ b.T, "left out the frozen weight"),
        (lambda x, w, a, b, alpha, r: x @ w.T + alpha * (x @ a.T) @ b.T, "scaled the update by alpha;"),
        (lambda x, w, a, b, alpha, r: x @ w.T + alpha / math.sqrt(r) * (x @ a.T) @ b.T, "rsLoRA"),
        (lambda x, w, a, b, alpha, r: x @ w.T + (x @ a.T) @ b.T, "forgot the scale"),
    ]),
    "check_loss_mask": (labels_ok, [
        (labels_no_end, "end-of-turn token"),
        (labels_with_role, "role token"),
        (lambda ids, spans: list(ids), "whole sequence"),
        (lambda ids, spans: [0 if v == -100 else v for v in labels_ok(ids, spans)], "filled the masked positions with 0"),
    ]),
    "check_last_token_index": (lambda km: torch.tensor([int(row.nonzero().max()) for row in km]), [
        (lambda km: torch.full((km.shape[0],), km.shape[1] - 1), "last column for every row"),
        (lambda km: km.sum(dim=1) - 1, "left padding"),
        (lambda km: km.long().argmax(dim=1), "first real token"),
        (lambda km: km.sum(dim=1), "without subtracting one"),
    ]),
    "check_mean_pooling": (lambda h, km: torch.stack([h[b, km[b]].mean(dim=0) for b in range(h.shape[0])]), [
        (lambda h, km: h.mean(dim=1), "every column, the padding too"),
        (lambda h, km: (h * km[..., None]).sum(dim=1), "without dividing"),
        (lambda h, km: (h * km[..., None]).sum(dim=1) / h.shape[1], "by T, the padded length"),
        (lambda h, km: h[:, -1], "last-token pooling"),
    ]),
}


def test_the_librarys_lora_layer_passes_the_lora_check():
    def lora_forward(x, weight, a, b, alpha, r):
        layer = LoRALinear(torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False), r=r, alpha=alpha)
        with torch.no_grad():
            layer.base.weight.copy_(weight)
            layer.lora_A.copy_(a)
            layer.lora_B.copy_(b)
        return layer(x).detach()
    assert ex.check_lora_forward(lora_forward, verbose=False).passed


def test_a_tensor_answer_passes_the_loss_mask_check_and_a_shifted_one_is_named():
    assert ex.check_loss_mask(lambda ids, spans: torch.tensor(labels_ok(ids, spans)), verbose=False).passed
    shifted = ex.check_loss_mask(lambda ids, spans: labels_ok(ids, spans)[1:] + [-100], verbose=False)
    assert not shifted.passed and "shifted the labels by one" in shifted.message



def test_the_classifiers_own_last_token_formula_passes_and_a_list_answer_is_accepted():
    library = lambda km: km.shape[1] - 1 - km.flip(1).long().argmax(dim=1)  # minitfm.finetuning.classification's line
    assert ex.check_last_token_index(library, verbose=False).passed
    assert ex.check_last_token_index(lambda km: library(km).tolist(), verbose=False).passed
    assert ex.check_mean_pooling(lambda h, km: torch.stack([h[b, km[b]].mean(0) for b in range(len(h))]),
                                 verbose=False).passed
