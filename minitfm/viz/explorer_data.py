"""The numbers behind the plots and explorers: attention maps, scaling, masks, positions, sampling.

Pure tensor functions, shared by ``plotting``, ``explorers`` (ipywidgets) and ``static_explorers``
(kernel-free HTML), so a live slider and a precomputed one show exactly the same data.

Glossary: B batch, H heads, L layers, T length, T_q/T_k queries/keys, D d_model, V vocabulary.

Attention weights are accepted as ``{kind: [per-layer tensor]}`` with kinds such as
``"encoder_self"``, ``"decoder_self"``, ``"cross"`` (or ``"self"`` for a decoder-only model); each
layer's tensor is (B, H, T_q, T_k) or (H, T_q, T_k). ``to_layer_list`` exports one kind in the
list-of-(B, H, T_q, T_k)-per-layer form that attention-visualisation tools such as bertviz accept.
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import torch

from minitfm._checks import check_choice, check_number, check_positive_int, check_tensor, check_token_ids
from minitfm.layers.attention import scaled_dot_product_attention
from minitfm.layers.attention_maps import (INTERMEDIATE_KINDS, attention_maps, check_weights, entropy,  # noqa: F401
                                           to_layer_list)
from minitfm.layers.masks import causal_mask, combine_masks, padding_mask
from minitfm.layers.positional import RotaryEmbedding, sinusoidal_encoding

KIND_TITLES = {"encoder_self": "encoder self-attention", "decoder_self": "decoder self-attention",
               "cross": "cross-attention", "self": "self-attention"}
MASK_KINDS = ("padding", "causal", "both")
POSITIONAL_SCHEMES = ("sinusoidal", "learned", "rope")


def check_labels(labels, n: int, name: str) -> list[str]:
    """Return ``labels`` as strings, or ``0..n-1`` when None; raise when the count differs from ``n``."""
    if labels is None:
        return [str(i) for i in range(n)]
    labels = [str(t) for t in labels]
    if len(labels) != n:
        raise ValueError(f"{name} has {len(labels)} labels but the tensor has {n} positions on that axis")
    return labels


def scaling_data(d_k: int, scaled: bool, seq_len: int = 8, n_samples: int = 256, seed: int = 0) -> dict:
    """Scores of random unit-variance q, k with and without the 1/sqrt(d_k) scale.

    Returns ``scores`` (n_samples, n_samples) for the histogram, ``weights`` (seq_len, seq_len) the
    softmax of the first seq_len queries over the first seq_len keys, ``entropy`` (seq_len,) of those rows.
    """
    check_positive_int(d_k, "d_k")
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_k, generator=gen)
    k = torch.randn(n_samples, d_k, generator=gen)
    scores = q @ k.T  # (N, d_k) @ (d_k, N) -> (N, N)
    if scaled:
        scores = scores / math.sqrt(d_k)
    weights = scores[:seq_len, :seq_len].softmax(dim=-1)
    return {"scores": scores, "weights": weights, "entropy": entropy(weights)}


def mask_data(tokens: torch.Tensor, pad_id: int, kind: str) -> dict:
    """The boolean mask of ``kind`` for a padded batch, and the weights it gives to equal scores.

    Returns ``mask`` (B, T, T) (True = may attend) and ``weights`` (B, T, T): attention with all scores
    equal, i.e. uniform over the allowed keys (a row with no allowed key gets zeros).
    """
    check_choice(kind, "kind", MASK_KINDS)
    pad = padding_mask(tokens, pad_id)  # (B, 1, 1, T)
    b, t = tokens.shape
    causal = causal_mask(t)  # (1, T, T)
    mask = {"padding": pad, "causal": causal, "both": combine_masks(pad, causal)}[kind]
    mask = mask.reshape(-1, *mask.shape[-2:]).expand(b, t, t)  # (B or 1, T_q or 1, T) -> (B, T, T)
    zeros = torch.zeros(b, t, 1)
    _, weights = scaled_dot_product_attention(zeros, zeros, zeros, mask=mask)
    return {"mask": mask.clone(), "weights": weights}


def positional_table(scheme: str, max_len: int, d_model: int, seed: int = 0) -> torch.Tensor:
    """What each scheme adds or applies per position.

    sinusoidal/learned: the (T, D) encodings (learned = an untrained, randomly initialised table);
    rope: a fixed vector of ones rotated to each position, (T, D). (ALiBi adds no encoding at all: see
    ``minitfm.layers.positional.alibi_bias`` for its distance penalty.)
    """
    check_choice(scheme, "scheme", POSITIONAL_SCHEMES)
    positions = torch.arange(max_len)
    if scheme == "sinusoidal":
        return sinusoidal_encoding(positions, d_model)
    if scheme == "learned":
        return torch.randn(max_len, d_model, generator=torch.Generator().manual_seed(seed)) * 0.02
    return RotaryEmbedding(d_model)(torch.ones(max_len, d_model))  # (T, D) rotated copies of one vector


def positional_similarity(scheme: str, max_len: int, d_model: int, position: int, seed: int = 0) -> torch.Tensor:
    """(T,) how position ``position`` relates to every position n: cosine similarity of the encodings
    (sinusoidal, learned) or the normalised RoPE score q_p . k_n for random q, k."""
    if not 0 <= position < max_len:
        raise ValueError(f"position must be in [0, {max_len - 1}], got {position}")
    table = positional_table(scheme, max_len, d_model, seed)
    if scheme == "rope":
        gen = torch.Generator().manual_seed(seed)
        q, k = torch.randn(2, 1, d_model, generator=gen)
        rope = RotaryEmbedding(d_model)
        q_rot = rope(q, positions=torch.tensor([position]))  # (1, D)
        k_rot = rope(k.expand(max_len, d_model))  # (T, D), key n rotated to position n
        return (k_rot @ q_rot[0]) / (q.norm() * k.norm())
    return torch.nn.functional.cosine_similarity(table, table[position][None], dim=-1)


def sampling_data(logits: torch.Tensor, history: torch.Tensor, temperature: float = 1.0, top_k: int = 0,
                  top_p: float = 1.0, penalty: float = 1.0) -> dict:
    """Next-token probabilities before and after the processors (top_k=0, top_p=1, penalty=1 mean off).

    Args:
        logits: (V,) next-token logits.
        history: (T,) token ids generated so far (the repetition penalty reads them).

    Returns ``before`` and ``after`` (V,) probabilities.
    """
    from minitfm.generation.sampling import RepetitionPenalty, Temperature, TopK, TopP, apply_processors  # written in parallel

    check_tensor(logits, "logits", ndim=1, floating=True)
    check_tensor(history, "history", ndim=1)
    if not torch.isfinite(logits).all():
        raise ValueError("logits contain NaN/Inf; the sampling explorer needs finite logits")
    processors = [RepetitionPenalty(penalty), Temperature(temperature)]
    processors += [TopK(top_k)] if top_k else []
    processors += [TopP(top_p)] if top_p < 1 else []
    after = apply_processors(history[None].long(), logits[None].float(), processors)[0]
    return {"before": logits.float().softmax(-1), "after": after.softmax(-1)}


def pick_batch(weights: torch.Tensor, batch_index: int) -> torch.Tensor:
    """(B, H, T_q, T_k) -> (H, T_q, T_k) of one batch item, with a clear error when out of range."""
    if not 0 <= batch_index < weights.shape[0]:
        raise ValueError(f"batch_index must be in [0, {weights.shape[0] - 1}], got {batch_index}")
    return weights[batch_index]


def label_sets(maps: Mapping[str, Sequence[torch.Tensor]], tokens_q=None, tokens_k=None) -> dict[str, tuple]:
    """Row and column labels for every kind.

    ``tokens_q`` are the query-side (decoder) tokens, ``tokens_k`` the key-side (encoder) tokens:
    encoder self-attention uses ``tokens_k`` on both axes, decoder self-attention ``tokens_q``, cross-attention
    ``tokens_q`` down and ``tokens_k`` across; any other kind uses whichever was given.
    """
    out = {}
    for kind, layers in maps.items():
        t_q, t_k = layers[0].shape[-2:]
        if kind == "encoder_self":
            rows = cols = tokens_k
        elif kind == "decoder_self":
            rows = cols = tokens_q
        elif kind == "cross":
            rows, cols = tokens_q, tokens_k
        else:
            rows = tokens_q if tokens_q is not None else tokens_k
            cols = tokens_k if tokens_k is not None else tokens_q
        out[kind] = (check_labels(rows, t_q, f"query (row) labels of {kind!r}"),
                     check_labels(cols, t_k, f"key (column) labels of {kind!r}"))
    return out


# ---- one-line readouts: the same words under a live widget and a kernel-free explorer ----

def attention_readout(kind: str, layer: int, head: int, weights: torch.Tensor, rows, cols) -> str:
    """Describe one (T_q, T_k) map: where its strongest weight is and how spread its rows are."""
    i, j = divmod(int(weights.argmax()), weights.shape[1])
    return (f"{KIND_TITLES.get(kind, kind)} · layer {layer} · head {head} · strongest: "
            f"{rows[i]!r} → {cols[j]!r} {float(weights[i, j]):.2f} · "
            f"mean row entropy {float(entropy(weights).mean()):.2f} nats")


def scaling_readout(d_k: int, scaled: bool, data: dict) -> str:
    t = data["weights"].shape[-1]
    return (f"d_k = {d_k}, {'scaled by 1/√d_k' if scaled else 'unscaled'}: score std "
            f"{float(data['scores'].std()):.2f} ({'unscaled ≈ ' if scaled else ''}√d_k = {math.sqrt(d_k):.2f}) · mean row entropy "
            f"{float(data['entropy'].mean()):.2f} nats (uniform: {math.log(t):.2f}) · "
            f"largest weight {float(data['weights'].max()):.2f}")


def mask_readout(kind: str, index: int, labels, mask: torch.Tensor) -> str:
    """``mask`` is the (T, T) mask of sequence ``index``."""
    words = " ".join(labels)
    blocked = int((~mask.any(-1)).sum())
    return (f"{kind} mask · sequence {index} ({words}) · {int(mask.sum())} of {mask.numel()} query-key pairs "
            f"may attend · rows with no visible key: {blocked}")


_TIE_TOLERANCE = 1e-5  # similarities closer than this are equal: float32 rounding is ~1e-7, a real gap far more


def positional_readout(scheme: str, pair: int, position: int, table: torch.Tensor, similarity: torch.Tensor) -> str:
    d_model = table.shape[-1]
    first, second = float(table[position, 2 * pair]), float(table[position, 2 * pair + 1])
    others = similarity.clone()
    others[position] = float("-inf")
    best = float(others.max())
    # Sinusoidal similarity depends on the distance alone, so p - 1 and p + 1 tie in exact arithmetic, and an
    # argmax would pick one by float rounding, differently on another CPU: name every position that ties.
    nearest = [int(n) for n in (others >= best - _TIE_TOLERANCE).nonzero().flatten()]
    which = f"position: {nearest[0]}" if len(nearest) == 1 else f"positions: {' and '.join(map(str, nearest))}"
    wave = "" if scheme == "learned" else f", wavelength {2 * math.pi * 10000 ** (2 * pair / d_model):.1f} positions"
    label = "learned (untrained)" if scheme == "learned" else scheme
    return (f"{label} · pair {pair} (dims {2 * pair}, {2 * pair + 1}){wave} · at position {position}: "
            f"({first:.2f}, {second:.2f}) · most similar other {which} ({best:.2f})")


def sampling_readout(before: torch.Tensor, after: torch.Tensor, labels) -> str:
    top = int(after.argmax())
    return (f"kept {int((after > 0).sum())} of {after.numel()} tokens · most likely: {labels[top]!r} "
            f"{float(after[top]):.2f} (was {float(before[top]):.2f}) · entropy {float(entropy(after)):.2f} nats "
            f"(was {float(entropy(before)):.2f})")


# ---- small built-in examples, so every explorer runs with no arguments ----

def example_batch() -> tuple[torch.Tensor, list[list[str]], int]:
    """A padded batch of three sentences: (tokens (B, T), labels per sequence, pad_id)."""
    sentences = [["the", "cat", "sat"], ["a", "dog", "ran", "home"], ["the", "big", "red", "dog", "saw", "it"]]
    t = max(map(len, sentences))
    labels = [s + ["<pad>"] * (t - len(s)) for s in sentences]
    vocab = {w: i for i, w in enumerate(["<pad>"] + sorted({w for s in sentences for w in s}))}
    tokens = torch.tensor([[vocab[w] for w in row] for row in labels])  # (B, T)
    return tokens, labels, 0


def mask_batch(tokens=None, labels=None, pad_id: int = 0) -> tuple[torch.Tensor, list[list[str]], int]:
    """The mask explorers' input: ``(tokens (B, T), labels per sequence, pad_id)``, the example batch by
    default, labels defaulting to the token ids; one label list per sequence, each of length T."""
    if tokens is None:
        tokens, labels, pad_id = example_batch()
    check_token_ids(tokens, "tokens", ndim=2)  # (B, T): one sequence needs tokens[None]
    check_number(pad_id, "pad_id", integer=True)
    labels = labels or [[str(int(t)) for t in row] for row in tokens]
    if len(labels) != tokens.shape[0]:
        raise ValueError(f"labels has {len(labels)} sequences but tokens has B = {tokens.shape[0]}")
    rows = [check_labels(row, tokens.shape[1], f"labels[{b}]") for b, row in enumerate(labels)]
    return tokens, rows, pad_id


def example_logits() -> tuple[torch.Tensor, list[str], torch.Tensor]:
    """Next-token logits after "the cat sat on the": (logits (V,), vocabulary labels, history (T,) ids)."""
    scores = {"mat": 3.0, "the": 2.4, "floor": 2.2, "cat": 1.9, "sofa": 1.6, "a": 1.2, "dog": 1.0, "red": 0.7,
              "big": 0.5, "on": 0.3, "sat": 0.2, "and": 0.0, "it": -0.3, ".": -0.6, "ran": -1.0, "<eos>": -1.5}
    labels = list(scores)
    history = torch.tensor([labels.index(w) for w in ["the", "cat", "sat", "on", "the"]])
    return torch.tensor(list(scores.values())), labels, history
