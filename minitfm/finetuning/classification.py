"""Classification with a decoder: read the last token's vector, map it to class scores.

Glossary: B batch, T length, D d_model, C classes.

A decoder-only model's token i has seen tokens 0..i, so only the **last** real token has read the whole
text: its final hidden vector (B, D) is the text's summary, and a new linear head turns it into C class
scores (as Hugging Face's ``LlamaForSequenceClassification`` and Raschka's spam classifier do). With padding,
"last" means the last *real* token of each row, not the last column: pooling a pad token would classify the
padding (a test checks that padding changes nothing).

``pooling="mean"`` averages the final hidden vectors of the real tokens instead (as sentence encoders such as
Sentence-BERT do). A small decoder's last vector is mostly about the next token, so on short texts the mean can hold
more of what the text is about; both read the same one forward pass, and chapter 15b measures the difference.

What trains is a choice (:func:`set_trainable`): the new head only (cheap, the backbone's features as they
are), the last k blocks and the final norm besides, or everything.

``DecoderClassifier(tokens)`` takes the same batches as a language model, so ``minitfm.training.train`` trains
it unchanged: a :class:`~minitfm.data.Batch` whose ``tgt_out`` is (B,) class ids (:func:`collate_classification`).
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from minitfm._checks import check_number, check_positive_int, check_tensor, check_token_ids
from minitfm.data import Batch, pad_sequences
from minitfm.finetuning.lora import check_decoder, lora_layers
from minitfm.models import DecoderOnlyLM

TRAINABLE = ("head", "last_blocks", "lora", "all")
POOLING = ("last", "mean")


class DecoderClassifier(nn.Module):
    """A :class:`DecoderOnlyLM` backbone and a linear head on its last real token (or on the mean of its tokens).

    Args:
        backbone: the (pretrained) decoder; its ``lm_head`` is kept but not used.
        n_classes: C >= 2.
        pad_id: the padding id of the batches (padding may be on either side; with sliding-window layers pad on
            the right, since a window counts columns as ``transformers`` does); ``None`` = no padding, and then
            a batch of several rows needs a ``key_mask``.
        pooling: ``"last"`` (the last real token's final vector) or ``"mean"`` (the mean over the real tokens).
    """

    def __init__(self, backbone: DecoderOnlyLM, n_classes: int, *, pad_id: int | None = None, pooling: str = "last"):
        super().__init__()
        check_decoder(backbone)
        check_positive_int(n_classes, "n_classes")
        if n_classes < 2:
            raise ValueError(f"n_classes must be >= 2 (one class needs no classifier), got {n_classes}")
        if pad_id is not None:
            check_number(pad_id, "pad_id", low=0, integer=True)
        if pooling not in POOLING:
            raise ValueError(f"pooling must be one of {list(POOLING)}, got {pooling!r}")
        self.backbone, self.n_classes, self.pad_id, self.pooling = backbone, n_classes, pad_id, pooling
        weight = backbone.tok_emb.weight
        self.head = nn.Linear(backbone.config.d_model, n_classes, dtype=weight.dtype, device=weight.device)

    def pooled(self, tokens: torch.Tensor, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T) ids -> (B, D), the final hidden vector of each row's last real token (``pooling="last"``) or
        the mean of its real tokens' vectors (``pooling="mean"``).

        ``key_mask`` (B, T) bool, ``True`` = real token, overrides ``tokens != pad_id``."""
        check_token_ids(tokens, "tokens")
        b, t = tokens.shape
        if key_mask is None and self.pad_id is None and b > 1:
            # transformers' *ForSequenceClassification refuses this too: the last column may be a pad token
            raise ValueError(f"pad_id=None cannot tell padding from tokens in a batch of {b} rows: give the "
                             "classifier a pad_id, or pass key_mask (True = real token), or one row at a time")
        if key_mask is None:
            key_mask = torch.ones_like(tokens, dtype=torch.bool) if self.pad_id is None else tokens != self.pad_id
        check_tensor(key_mask, "key_mask", ndim=2)
        if key_mask.dtype != torch.bool or key_mask.shape != tokens.shape:
            raise ValueError(f"key_mask must be bool of the tokens' shape {tuple(tokens.shape)}, got {key_mask.dtype} "
                             f"{tuple(key_mask.shape)}")
        empty = (~key_mask.any(dim=1)).nonzero().flatten().tolist()
        if empty:
            raise ValueError(f"rows {empty[:5]} hold only padding (pad_id={self.pad_id}): nothing to classify")
        # the model's own forward: positions count real tokens, padding keys are hidden, and every layer keeps
        # its window and its RoPE (or none)
        h = self.backbone.hidden_states(tokens, key_mask=key_mask)  # (B, T, D)
        if self.pooling == "mean":
            real = key_mask.unsqueeze(-1).to(h.dtype)  # (B, T, 1): padding weighs nothing
            return (h * real).sum(dim=1) / real.sum(dim=1)  # (B, T, D) -> (B, D)
        last = t - 1 - key_mask.flip(1).long().argmax(dim=1)  # (B,) column of the last real token
        return h[torch.arange(b, device=tokens.device), last]  # (B, T, D) -> (B, D)

    def forward(self, tokens: torch.Tensor, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T) ids -> (B, C) class scores (logits)."""
        return self.head(self.pooled(tokens, key_mask))


def set_trainable(classifier: DecoderClassifier, what: str, k: int | None = None) -> int:
    """Choose what trains and return how many parameters do.

    ``what``: ``"head"`` (the new head only), ``"last_blocks"`` (the head, the last ``k`` blocks and the
    final norm), ``"lora"`` (the head and the LoRA adapters that ``add_lora(classifier.backbone, ...)`` put in),
    or ``"all"`` (everything, embeddings included)."""
    if not isinstance(classifier, DecoderClassifier):
        raise TypeError(f"classifier must be a DecoderClassifier, got {type(classifier).__name__}")
    if what not in TRAINABLE:
        raise ValueError(f"what must be one of {list(TRAINABLE)}, got {what!r}")
    n_layers = len(classifier.backbone.layers)
    if (what == "last_blocks") != (k is not None):
        raise ValueError(f"k (how many blocks) goes with what='last_blocks' only, got what={what!r}, k={k!r}")
    if k is not None:
        check_positive_int(k, "k")
        if k > n_layers:
            raise ValueError(f"k must be <= the backbone's {n_layers} blocks, got {k}")
    adapters = lora_layers(classifier)
    if what == "lora" and not adapters:
        raise ValueError("what='lora' trains LoRA adapters, but the backbone has none: add_lora(classifier.backbone)")
    classifier.requires_grad_(what == "all")
    classifier.head.requires_grad_(True)
    if what == "lora":
        for layer in adapters.values():
            layer.lora_A.requires_grad_(True)
            layer.lora_B.requires_grad_(True)
    if what == "last_blocks":
        for block in classifier.backbone.layers[n_layers - k:]:
            block.requires_grad_(True)
        classifier.backbone.final_norm.requires_grad_(True)
    return sum(p.numel() for p in classifier.parameters() if p.requires_grad)


def collate_classification(seqs: Sequence[torch.Tensor], labels: Sequence[int], *, pad_id: int) -> Batch:
    """1-D id sequences and their class ids -> a :class:`Batch` that ``train`` feeds a DecoderClassifier:
    ``tgt_in`` (B, T) right-padded with ``pad_id``, ``tgt_out`` (B,) the classes (``Batch.pad_id`` = -100, which
    no class id equals, so every row counts)."""
    if len(seqs) != len(labels):
        raise ValueError(f"seqs and labels must have the same length, got {len(seqs)} and {len(labels)}")
    bad = [y for y in labels if isinstance(y, bool) or not isinstance(y, int) or y < 0]
    if bad:
        raise ValueError(f"labels must be class ids (ints >= 0), got {bad[:3]}")
    return Batch(None, pad_sequences(list(seqs), pad_id), torch.tensor(list(labels), dtype=torch.long), -100)


def classification_batches(seqs: Sequence[torch.Tensor], labels: Sequence[int], batch_size: int, *, pad_id: int,
                           seed: int):
    """Endless batches for ``train`` in whole epochs: each pass shuffles the examples (seeded) and cuts them into
    batches of ``batch_size`` (a last short batch is dropped, so every batch has the same size), so after k passes
    every example has been trained on k times, less the few dropped at the end of a pass."""
    if len(seqs) != len(labels):
        raise ValueError(f"seqs and labels must have the same length, got {len(seqs)} and {len(labels)}")
    check_positive_int(batch_size, "batch_size")
    if batch_size > len(seqs):
        raise ValueError(f"batch_size must be <= the {len(seqs)} examples, got {batch_size}")
    check_number(seed, "seed", integer=True)
    generator = torch.Generator().manual_seed(seed)
    while True:
        order = torch.randperm(len(seqs), generator=generator).tolist()
        for start in range(0, len(order) - batch_size + 1, batch_size):
            rows = order[start:start + batch_size]
            yield collate_classification([seqs[i] for i in rows], [labels[i] for i in rows], pad_id=pad_id)


@torch.no_grad()
def classify(classifier: DecoderClassifier, seqs: Sequence[torch.Tensor], *, batch_size: int = 64) -> torch.Tensor:
    """(N,) the class each 1-D id sequence gets (argmax of the scores), in batches right-padded with the
    classifier's ``pad_id``; the classifier is put in eval mode."""
    if not isinstance(classifier, DecoderClassifier):
        raise TypeError(f"classifier must be a DecoderClassifier, got {type(classifier).__name__}")
    if classifier.pad_id is None:
        raise ValueError("classify pads its batches: give the classifier a pad_id")
    check_positive_int(batch_size, "batch_size")
    classifier.eval()
    device = classifier.head.weight.device
    out = [classifier(pad_sequences(list(seqs[i:i + batch_size]), classifier.pad_id).to(device)).argmax(dim=-1)
           for i in range(0, len(seqs), batch_size)]
    return torch.cat(out).cpu()
