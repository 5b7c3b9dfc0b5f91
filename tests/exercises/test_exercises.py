"""Every checker accepts a correct implementation and names each typical mistake.

For each checker the table below lists a correct function (the library's own, or one written from
scratch) and at least three wrong ones, each with the words its feedback must contain.
"""
import json
import math
import re

import pytest
import torch
import torch.nn.functional as F

import minitfm as m
from minitfm import exercises as ex
from test_exercises_architectures import CASES as ARCHITECTURES_CASES
from test_exercises_bpe import CASES as BPE_CASES
from test_exercises_evaluation import CASES as EVALUATION_CASES
from test_exercises_finetuning import CASES as FINETUNING_CASES
from test_exercises_pretrained import CASES as PRETRAINED_CASES
from test_exercises_preferences import CASES as PREFERENCES_CASES

# ---- correct implementations written from scratch (the library's are used where the signature fits) ----
def attention_ok(q, k, v, mask):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    return weights @ v, weights


def attention_wrong(scale=None, dim=-1, fill=None, flip=False, transpose_w=False):
    def fn(q, k, v, mask):
        s = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale(q))
        if mask is not None:
            s = s.masked_fill(mask if flip else ~mask, torch.finfo(s.dtype).min if fill is None else fill)
        w = s.softmax(dim)
        if mask is not None and fill is None:
            w = w.masked_fill(mask if flip else ~mask, 0.0)
        return w @ v, (w.transpose(-2, -1) if transpose_w else w)
    return fn


def rope_ok(x, positions):
    return m.RotaryEmbedding(x.shape[-1])(x, positions=positions)


def rope_halves(x, positions):
    d = x.shape[-1]
    ang = positions.float()[:, None] * 10000.0 ** (-torch.arange(0, d, 2).float() / d)
    x0, x1 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x0 * ang.cos() - x1 * ang.sin(), x0 * ang.sin() + x1 * ang.cos()], -1).to(x.dtype)


def rope_pairs(x, positions, sign=1.0):
    d = x.shape[-1]
    ang = positions.float()[:, None] * 10000.0 ** (-torch.arange(0, d, 2).float() / d)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    cos, sin = ang.cos(), sign * ang.sin()
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2).to(x.dtype)


def sinusoidal(positions, d, swap=False, halves=False, step=2):
    i = torch.arange(0, d, 2) if step == 2 else torch.arange(d // 2)
    ang = positions.float()[:, None] / 10000.0 ** (i / d)
    a, b = (ang.cos(), ang.sin()) if swap else (ang.sin(), ang.cos())
    return torch.cat([a, b], -1) if halves else torch.stack([a, b], -1).flatten(-2)


def alibi_from_scratch(n):
    def pow2(k):
        return [2 ** (-8 * (i + 1) / k) for i in range(k)]
    p = 2 ** int(math.log2(n))
    return torch.tensor(pow2(p) + pow2(2 * p)[0::2][: n - p])


def rms_ok(x, w, eps):
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def layer_ok(x, w, b, eps):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps) * w + b


def swiglu_ok(x, g, u, d, act=F.silu):
    return F.linear(act(F.linear(x, g)) * F.linear(x, u), d)


def shift_inplace(t, bos):
    t[:, 1:] = t[:, :-1].clone()
    t[:, 0] = bos
    return t


def smoothed_others(logits, target, eps, ignore):
    logp = logits.log_softmax(-1)
    v = logits.shape[-1]
    dist = torch.full_like(logp, eps / (v - 1)).scatter(-1, target.clamp(min=0)[..., None], 1 - eps)
    loss = -(dist * logp).sum(-1)
    return loss[target != ignore].mean()


def cache_ok(kc, vc, n, k, v):
    end = n + k.shape[2]
    kc[:, :, n:end], vc[:, :, n:end] = k, v
    return kc[:, :, :end], vc[:, :, :end], end


def cache_at(start, whole=False, advance=True):
    def fn(kc, vc, n, k, v):
        s = start(n)
        kc[:, :, s:s + k.shape[2]], vc[:, :, s:s + k.shape[2]] = k, v
        end = n + k.shape[2]
        stop = kc.shape[2] if whole else end
        return kc[:, :, :stop], vc[:, :, :stop], end if advance else n
    return fn


def cache_cat(kc, vc, n, k, v):
    return torch.cat([kc[:, :, :n], k], 2), torch.cat([vc[:, :, :n], v], 2), n + k.shape[2]


def top_k_inplace(logits, k):
    kth = logits.topk(min(k, logits.shape[-1])).values[:, -1:]
    return logits.masked_fill_(logits < kth, float("-inf"))


def top_k_exact(logits, k, extra=0, fill=float("-inf")):
    n = min(k + extra, logits.shape[-1])
    kth = logits.topk(n).values[:, -1:]
    return logits.masked_fill(logits < kth, fill)


def top_p_naive(logits, p, shift=False, sort=True):
    order = logits.argsort(-1, descending=True) if sort else torch.arange(logits.shape[-1]).expand_as(logits)
    probs = logits.gather(-1, order).float().softmax(-1)
    mass = probs.cumsum(-1) - (probs if shift else 0)
    remove = mass >= p if shift else mass > p
    return logits.masked_fill(remove.scatter(-1, order, remove), float("-inf"))


def penalty_ok(tokens, logits, penalty):
    return m.RepetitionPenalty(penalty)(tokens, logits)


def penalty_divide_all(tokens, logits, penalty):
    seen = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, tokens, True) if tokens.numel() else \
        torch.zeros_like(logits, dtype=torch.bool)
    return torch.where(seen, logits / penalty, logits)


def penalty_count(tokens, logits, penalty):
    out = logits.clone()
    for b in range(tokens.shape[0]):
        for t in tokens[b].tolist():
            out[b, t] = out[b, t] / penalty if out[b, t] > 0 else out[b, t] * penalty
    return out


def penalty_batch(tokens, logits, penalty):
    return m.RepetitionPenalty(penalty)(tokens.reshape(1, -1).expand(tokens.shape[0], -1), logits)


def beam_ok(scores, logp, k):
    v = logp.shape[-1]
    top, flat = (scores[:, None] + logp).flatten().topk(k)
    return flat // v, flat % v, top


def beam_no_scores(scores, logp, k):
    v = logp.shape[-1]
    _, flat = logp.flatten().topk(k)
    return flat // v, flat % v, scores[flat // v] + logp.flatten()[flat]


def beam_per_beam(scores, logp, k):
    best, token = (scores[:, None] + logp).max(-1)
    top, beam = best.topk(k)
    return beam, token[beam], top


def beam_swapped(scores, logp, k):
    v = logp.shape[-1]
    top, flat = (scores[:, None] + logp).flatten().topk(k)
    return flat % v, flat // v, top


def finder(test=lambda t: not torch.isfinite(t).all(), last=False, remove=True, empty=None):
    def fn(model, x):
        hits, handles = [], []
        for name, module in model.named_modules():
            if name and not isinstance(module, torch.nn.Sequential):
                handles.append(module.register_forward_hook(
                    lambda mod, a, out, n=name: hits.append(n) if test(out) else None))
        model(x)
        if remove:
            for h in handles:
                h.remove()
        return (hits[-1] if last else hits[0]) if hits else empty
    return fn


def finder_registration(model, x):
    bad = {n for n in [finder()(model, x)] if n}
    hits = []
    handles = [mod.register_forward_hook(lambda mod, a, out, n=n: hits.append(n) if not torch.isfinite(out).all()
                                         else None) for n, mod in model.named_modules()
               if n and not isinstance(mod, torch.nn.Sequential)]
    model(x)
    for h in handles:
        h.remove()
    names = [n for n, _ in model.named_modules()]
    return min(set(hits) | bad, key=names.index) if hits else None


def leaks(fn, x, start=lambda t: t + 1, atol=1e-6, last_only=False):
    base, out = fn(x), []
    for t in range(x.shape[1] - 1):
        alt = x.clone()
        s = x.shape[1] - 1 if last_only else start(t)
        alt[:, s:] += 1.0
        if (fn(alt)[:, t] - base[:, t]).abs().max() > atol:
            out.append(t)
    return out


def noam_scratch(step, d, w):
    return 0.0 if step == 0 else d ** -0.5 * min(step ** -0.5, step * w ** -1.5)


def cosine(step, peak, warm, total, low, progress=None, clamp=True, floor=True, off=0):
    if step < warm:
        return peak * (step + off) / warm
    x = (step - warm) / max(1, total - warm) if progress is None else progress(step, total)
    x = min(1.0, x) if clamp else x
    base = low if floor else 0.0
    return base + (peak - base) * 0.5 * (1 + math.cos(math.pi * x))


def causal(t_q, t_k):
    return m.causal_mask(t_q, t_k)


def online_ok(x, block_size, rescale=True, shift=True, finite=True, empty=True, per_block=False):
    x32 = x.float()
    m = torch.full(x.shape[:-1], float("-inf"))
    l = torch.zeros(x.shape[:-1])
    parts = []
    for s in range(0, x.shape[-1], block_size):
        block = x32[..., s:s + block_size]
        if per_block:
            parts.append(block.softmax(-1))
            continue
        m_new = torch.maximum(m, block.amax(-1)) if shift else torch.zeros_like(m)
        ref = torch.where(m_new == float("-inf"), 0.0, m_new) if finite else m_new
        l = l * (torch.exp(m - ref) if rescale and shift else 1.0) + torch.exp(block - ref[..., None]).sum(-1)
        m = m_new
    if per_block:
        return torch.cat(parts, -1).to(x.dtype)
    ref = torch.where(m == float("-inf"), 0.0, m) if finite else m
    return (torch.exp(x32 - ref[..., None]) / (torch.where(l == 0, 1.0, l) if empty else l)[..., None]).to(x.dtype)


def tiled_ok(q, k, v, b, causal, scale=None, rescale=True, normalise=True, offset=None, full_mask=False):
    t_q, t_k = q.shape[-2], k.shape[-2]
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    offset = t_k - t_q if offset is None else offset
    allowed = torch.arange(t_k)[None, :] <= torch.arange(t_q)[:, None] + offset if full_mask else None  # (T_q, T_k)
    out = []
    for r in range(0, t_q, b):
        qs = q[..., r:r + b, :] * scale
        m = torch.full(qs.shape[:-1], float("-inf"))
        l = torch.zeros(qs.shape[:-1])
        acc = torch.zeros(qs.shape[:-1] + v.shape[-1:])
        for c in range(0, t_k, b):
            if causal and c > r + qs.shape[-2] - 1 + offset:
                break  # every later tile is in the future of every row of this block
            s = qs @ k[..., c:c + b, :].transpose(-2, -1)
            if causal:
                keep = allowed[r:r + b, c:c + b] if full_mask else \
                    torch.arange(c, c + s.shape[-1])[None, :] <= torch.arange(r, r + s.shape[-2])[:, None] + offset
                s = s.masked_fill(~keep, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1))
            ref = torch.where(m_new == float("-inf"), 0.0, m_new)
            old = torch.exp(m - ref) if rescale else torch.ones_like(m)
            p = torch.exp(s - ref[..., None])
            l, acc, m = l * old + p.sum(-1), acc * old[..., None] + p @ v[..., c:c + b, :], m_new
        out.append(acc / torch.where(l == 0, 1.0, l)[..., None] if normalise else acc)
    return torch.cat(out, -2)


T = torch.ones
CASES = {
    "check_attention": (
        attention_ok,
        [(attention_wrong(scale=lambda q: 1.0), r"1/sqrt\(d_k\) scale is missing"),
         (attention_wrong(scale=lambda q: 1 / q.shape[-1]), r"divide the scores by d_k"),
         (attention_wrong(dim=-2), r"softmax runs over the wrong axis"),
         (attention_wrong(flip=True), r"polarity is flipped"),
         (attention_wrong(fill=float("-inf")), r"NaN in a fully masked row"),
         (attention_wrong(fill=-1e9), r"fully masked row must get weights of 0"),
         (attention_wrong(transpose_w=True), r"weights are transposed"),
         (lambda q, k, v, mask: attention_ok(q, k, v, mask)[::-1], r"return \(output, weights\) in this order")]),
    "check_padding_mask": (
        m.padding_mask,
        [(lambda t, p: (t == p)[:, None, None], "polarity is flipped"),
         (lambda t, p: (t != 0)[:, None, None], "instead of pad_id"),
         (lambda t, p: t != p, r"your mask is \(B, T\)"),
         (lambda t, p: (t != p)[:, None, :, None], r"hides padded queries"),
         (lambda t, p: (t != p)[:, None, None].float(), "boolean tensor")]),
    "check_causal_mask": (
        causal,
        [(lambda q, k: ~causal(q, k), "polarity is flipped"),
         (lambda q, k: ~T(q, k, dtype=torch.bool).triu(k - q), "must also see its own position"),
         (lambda q, k: ~T(q, k, dtype=torch.bool).triu(k - q + 2), "see one future position"),
         (lambda q, k: T(q, k, dtype=torch.bool).tril(), "aligned top-left"),
         (lambda q, k: causal(q, k)[0].T, "transposed"),
         (lambda q, k: causal(q, k).float(), "boolean tensor")]),
    "check_split_heads": (
        lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1).transpose(1, 2),
        [(lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1), r"single view\(B, H, T, Dh\)"),
         (lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1), "forgot the transpose"),
         (lambda x, h: x.reshape(x.shape[0], x.shape[1], -1, h).permute(0, 3, 1, 2), "every H-th feature"),
         (lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1).permute(0, 2, 3, 1), "last two axes are swapped")]),
    "check_merge_heads": (
        lambda x: x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1),
        [(lambda x: x.reshape(x.shape[0], x.shape[2], -1), "without moving H next to Dh"),
         (lambda x: x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], -1), "interleaved"),
         (lambda x: x.transpose(1, 2), "heads are not merged"),
         (lambda x: x.transpose(1, 2).view(x.shape[0], x.shape[2], -1), "hint: after a transpose")]),
    "check_sinusoidal_encoding": (
        lambda pos, d: sinusoidal(pos, d),
        [(lambda pos, d: sinusoidal(pos, d, swap=True), "sine and cosine are swapped"),
         (lambda pos, d: sinusoidal(pos, d, halves=True), "all the sines first"),
         (lambda pos, d: sinusoidal(pos, d, step=1), "off by a factor of 2"),
         (lambda pos, d: torch.stack([(pos[:, None] * 10000.0 ** (torch.arange(0, d, 2) / d)).sin(),
                                      (pos[:, None] * 10000.0 ** (torch.arange(0, d, 2) / d)).cos()], -1).flatten(-2),
          "grow instead of shrink")]),
    "check_rope": (
        rope_pairs,
        [(rope_halves, "rotate the two halves"),
         (lambda x, p: rope_pairs(x, p, sign=-1.0), "rotation goes the wrong way"),
         (lambda x, p: rope_pairs(x, torch.arange(x.shape[-2])), "ignore the positions argument")]),
    "check_alibi_slopes": (
        alibi_from_scratch,
        [(lambda n: [2 ** (-8 * i / n) for i in range(n)], "slopes start at 1"),
         (lambda n: m.alibi_slopes(n).flip(0), "wrong order"),
         (lambda n: torch.tensor([2 ** (-8 * (i + 1) / n) for i in range(n)]), "power-of-two formula")]),
    "check_rms_norm": (
        rms_ok,
        [(lambda x, w, e: x / (x.pow(2).mean(-1, keepdim=True).sqrt() + e) * w, "eps is outside the square root"),
         (lambda x, w, e: rms_ok(x - x.mean(-1, keepdim=True), w, e), "that is LayerNorm"),
         (lambda x, w, e: x * torch.rsqrt(x.pow(2).mean(0, keepdim=True) + e) * w, "wrong axis"),
         (lambda x, w, e: rms_ok(x, torch.ones_like(w), e), "weight is missing"),
         (lambda x, w, e: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + e) * w, "float16 overflow")]),
    "check_layer_norm": (
        layer_ok,
        [(lambda x, w, b, e: (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + e) * w + b,
          "unbiased variance"),
         (lambda x, w, b, e: (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True, unbiased=False) + e) * w + b,
          "eps is outside the square root"),
         (lambda x, w, b, e: x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + e) * w + b, "forgot to subtract"),
         (lambda x, w, b, e: F.layer_norm(x, x.shape[-1:], eps=e), "weight and bias are missing")]),
    "check_swiglu": (
        swiglu_ok,
        [(lambda x, g, u, d: swiglu_ok(x, u, g, d), "gate and up are swapped"),
         (lambda x, g, u, d: swiglu_ok(x, g, u, d, act=torch.sigmoid), "sigmoid gate"),
         (lambda x, g, u, d: swiglu_ok(x, g, u, d, act=F.relu), "you used ReLU"),
         (lambda x, g, u, d: (F.silu(x @ g) * (x @ u)) @ d, r"stored \(out, in\)")]),
    "check_shift_right": (
        m.shift_right,
        [(lambda t, b: t.clone(), "nothing is shifted"),
         (lambda t, b: torch.cat([t[:, 1:], torch.full_like(t[:, :1], b)], 1), "shifted left"),
         (lambda t, b: torch.cat([torch.full_like(t[:, :1], b), t], 1), "one column too long"),
         (shift_inplace, "changed its input `tgt_out` in place"),
         (lambda t, b: torch.cat([torch.full_like(t[:, :1], b), t[:, :-1]], 1).long(), "wrong dtype")]),
    "check_label_smoothed_loss": (
        lambda lg, t, s, i: F.cross_entropy(lg.flatten(0, -2), t.flatten(), ignore_index=i, label_smoothing=s),
        [(smoothed_others, "V - 1 wrong ids"),
         (lambda lg, t, s, i: F.cross_entropy(lg.flatten(0, -2), t.flatten().clamp(min=0), label_smoothing=s)
          if i < 0 else F.cross_entropy(lg.flatten(0, -2), t.flatten(), label_smoothing=s), "padding counts"),
         (lambda lg, t, s, i: F.cross_entropy(lg.flatten(0, -2), t.flatten(), ignore_index=i, label_smoothing=s,
                                              reduction="sum"), "return the sum"),
         (lambda lg, t, s, i: F.cross_entropy(lg.flatten(0, -2), t.flatten(), ignore_index=i), "smoothing is ignored")]),
    "check_noam": (
        noam_scratch,
        [(m.training.buggy_noam_lr, "there is no warmup"),
         (lambda s, d, w: 0.0 if s == 0 else d ** -0.5 * max(s ** -0.5, s * w ** -1.5), r"use max\(\)"),
         (lambda s, d, w: 0.0 if s == 0 else min(s ** -0.5, s * w ** -1.5), "d_model\\^-0.5 factor is missing"),
         (lambda s, d, w: d ** -0.5 * min(s ** -0.5, s * w ** -1.5), "ZeroDivisionError.*\n  hint: 0 \\*\\* -0.5")]),
    "check_warmup_cosine": (
        m.warmup_cosine_lr,
        [(lambda *a: cosine(*a, progress=lambda s, t: s / t), "runs over total_steps instead"),
         (lambda *a: cosine(*a, clamp=False), "climbs back up"),
         (lambda *a: cosine(*a, floor=False), "min_lr is ignored"),
         (lambda *a: cosine(*a, off=1), "warmup is off by one")]),
    "check_kv_cache_update": (
        cache_ok,
        [(cache_at(lambda n: 0), "position 0 every time"),
         (cache_at(lambda n: n + 1), "one position after the length pointer"),
         (cache_at(lambda n: n, whole=True), "whole buffer"),
         (cache_at(lambda n: n, advance=False), "length pointer did not move"),
         (cache_cat, "buffers were not written")]),
    "check_top_k": (
        top_k_exact,
        [(lambda lg, k: top_k_exact(lg, k, fill=0.0), "must get -inf"),
         (lambda lg, k: top_k_exact(lg, k, extra=1), r"keep k \+ 1"),
         (lambda lg, k: -top_k_exact(-lg, k), "k smallest"),
         (lambda lg, k: top_k_exact(lg, k).softmax(-1), "not probabilities"),
         (top_k_inplace, "changed its input `logits` in place"),
         (lambda lg, k: top_k_exact(lg, k, extra=0) if k <= lg.shape[-1] else lg.topk(k), "hint: k may exceed")]),
    "check_top_p": (
        lambda lg, p: top_p_naive(lg, p, shift=True),
        [(top_p_naive, "removed the token that takes the total over p"),
         (lambda lg, p: top_p_naive(lg, p, shift=True, sort=False), "vocabulary order"),
         (lambda lg, p: top_p_naive(lg, p, shift=True).nan_to_num(neginf=0.0), "must get -inf"),
         (lambda lg, p: torch.full_like(lg, float("-inf")), "no token left")]),
    "check_temperature": (
        lambda lg, t: lg / t,
        [(lambda lg, t: lg * t, "multiply by the temperature"),
         (lambda lg, t: (lg / t).softmax(-1), "not probabilities"),
         (lambda lg, t: (lg / t).log_softmax(-1), "log-probabilities"),
         (lambda lg, t: lg.div_(t), "changed its input `logits` in place")]),
    "check_repetition_penalty": (
        penalty_ok,
        [(penalty_divide_all, "raises a negative logit"),
         (penalty_count, "once per occurrence"),
         (penalty_batch, "every row's history"),
         (lambda tk, lg, p: penalty_ok(tk, lg, 1 / p), "goes the wrong way")]),
    "check_beam_step": (
        beam_ok,
        [(beam_no_scores, "add each beam's score first"),
         (beam_per_beam, "only its own best token"),
         (beam_swapped, "beam and token are swapped")]),
    "check_first_nonfinite": (
        finder(),
        [(finder(test=lambda t: t.isnan().any()), "NaN only"),
         (finder(last=True), "the last module"),
         (finder_registration, "order they were registered"),
         (finder(remove=False), "left forward hooks"),
         (finder(empty=""), "return None")]),
    "check_causality_detector": (
        leaks,
        [(lambda fn, x: leaks(fn, x, last_only=True), "only change the last token"),
         (lambda fn, x: leaks(fn, x, start=lambda t: t), "also change the token at t itself"),
         (lambda fn, x: leaks(fn, x, atol=1e-2), "small leak went unnoticed")]),
    "check_patchify": (
        lambda im, p: im.reshape(im.shape[0], im.shape[1], im.shape[2] // p, p, im.shape[3] // p, p)
        .permute(0, 2, 4, 1, 3, 5).flatten(3).flatten(1, 2),
        [(lambda im, p: im.reshape(im.shape[0], -1, im.shape[1] * p * p), "straight into"),
         (lambda im, p: im.reshape(im.shape[0], im.shape[1], im.shape[2] // p, p, im.shape[3] // p, p)
          .permute(0, 2, 4, 3, 5, 1).flatten(3).flatten(1, 2), r"flattened as \(P, P, C\)"),
         (lambda im, p: im.reshape(im.shape[0], im.shape[1], im.shape[2] // p, p, im.shape[3] // p, p)
          .permute(0, 4, 2, 1, 3, 5).flatten(3).flatten(1, 2), "column by column"),
         (lambda im, p: F.unfold(im, p, stride=p), r"as F.unfold returns it")]),
    "check_window_partition": (
        lambda x, m: x.unflatten(1, (-1, m)).unflatten(3, (-1, m)).transpose(2, 3).flatten(3, 4).flatten(0, 2),
        [(lambda x, m: x.reshape(-1, m * m, x.shape[-1]), "straight into"),
         (lambda x, m: x.unflatten(1, (-1, m)).unflatten(3, (-1, m)).permute(0, 3, 1, 2, 4, 5).flatten(3, 4)
          .flatten(0, 2), "windows are numbered column by column"),
         (lambda x, m: x.unflatten(1, (-1, m)).unflatten(3, (-1, m)).permute(0, 1, 3, 4, 2, 5).flatten(3, 4)
          .flatten(0, 2), "inside each window are in column order")]),
    "check_online_softmax": (
        online_ok,
        [(lambda x, b: online_ok(x, b, rescale=False), r"multiply it by exp\(m_old - m_new\)"),
         (lambda x, b: online_ok(x, b, shift=False), "exp overflowed"),
         (lambda x, b: online_ok(x, b, per_block=True), "normalised each block on its own"),
         (lambda x, b: online_ok(x, b, empty=False), "must get all-zero weights"),
         (lambda x, b: online_ok(x, b, finite=False), r"NaN where a whole block is -inf"),
         (lambda x, b: online_ok(x.float(), b), "wrong dtype")]),
    "check_tiled_attention": (
        tiled_ok,
        [(lambda q, k, v, b, c: tiled_ok(q, k, v, b, c, scale=1.0), r"1/sqrt\(Dh\) scale is missing"),
         (lambda q, k, v, b, c: tiled_ok(q, k, v, b, c, rescale=False), "were summed against the old max"),
         (lambda q, k, v, b, c: tiled_ok(q, k, v, b, c, normalise=False), "un-normalised sum"),
         (lambda q, k, v, b, c: tiled_ok(q, k, v, b, c, offset=0), "aligned top-left"),
         (lambda q, k, v, b, c: tiled_ok(q, k, v, b, False), "causal=True is ignored"),
         (lambda q, k, v, b, c: tiled_ok(q, k, v, b, c, full_mask=True), r"created a tensor of shape \(64, 64\)"),
         (lambda q, k, v, b, c: m.scaled_dot_product_attention(q, k, v, m.causal_mask(q.shape[-2], k.shape[-2])
                                                               if c else None)[0],
          r"created a tensor of shape \((1, 2, )?64, 64\)")]),
}
CASES.update(BPE_CASES)  # chapter 7c's checkers, whose cases live beside their own tests
CASES.update(PRETRAINED_CASES)  # chapters 13 and 13b's checkers, likewise
CASES.update(EVALUATION_CASES)  # chapter 14's checkers, likewise
CASES.update(FINETUNING_CASES)  # chapter 15's checkers, likewise
CASES.update(ARCHITECTURES_CASES)  # chapter 13c's checkers, likewise
CASES.update(PREFERENCES_CASES)  # chapter 16's checkers, likewise


def test_every_checker_is_in_the_table_with_three_wrong_implementations():
    assert set(CASES) == set(ex.CHECKERS) and len(CASES) >= 22
    assert all(len(wrong) >= 3 for _, wrong in CASES.values())


@pytest.mark.parametrize("name", sorted(CASES))
def test_accepts_a_correct_implementation(name, capsys):
    result = ex.CHECKERS[name](CASES[name][0])
    assert result.passed, result.message
    assert result.message == f"✓ {name}: all {result.n_cases} cases pass" and result.n_cases >= 3
    assert capsys.readouterr().out.strip() == result.message


WRONG = [(name, i, fn, match) for name, (_, wrong) in sorted(CASES.items()) for i, (fn, match) in enumerate(wrong)]


@pytest.mark.parametrize("name, i, fn, match", WRONG, ids=[f"{w[0]}-{w[1]}" for w in WRONG])
def test_rejects_a_wrong_implementation_with_its_message(name, i, fn, match):
    result = ex.CHECKERS[name](fn, verbose=False)
    assert not result.passed and result.status == "fail"
    assert result.message.startswith(f"✗ {name}: case ")
    assert re.search(match, result.message), f"{match!r} not in:\n{result.message}"
    assert "Traceback" not in result.message and "def " not in result.message


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_stub_is_not_implemented_yet(name):
    def stub(*args):
        raise NotImplementedError
    result = ex.CHECKERS[name](stub, verbose=False)
    assert not result.passed and result.status == "not implemented"
    assert result.message == f"… {name}: not implemented yet: write your function above, then run this cell again"


def test_a_number_just_outside_the_tolerance_is_reported():
    """A checker's number is right within atol + rtol * |expected| (1e-5 + 1e-4 here), and wrong just past it:
    a loose comparison would let an off-by-one learning rate or a 1% error through."""
    from minitfm.exercises._feedback import describe_difference

    assert describe_difference(1.0 + 5e-5, 1.0) is None
    assert describe_difference(1.0 + 2e-4, 1.0) == "your output is 1.0002, expected 1"
    assert describe_difference(torch.tensor(1.0 + 2e-4), 1.0) == "your output is 1.0002, expected 1"


def test_a_result_that_is_not_a_function_is_explained():
    result = ex.check_causal_mask(m.causal_mask(3), verbose=False)
    assert not result and "pass your function itself" in result.message


def test_verdicts_go_to_a_json_log_when_asked(tmp_path, monkeypatch):
    log = tmp_path / "verdicts.jsonl"
    monkeypatch.setenv("MINITFM_CHECK_LOG", str(log))
    ex.check_temperature(lambda lg, t: lg / t, verbose=False)
    ex.check_temperature(lambda lg, t: lg * t, verbose=False)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["checker"], r["passed"], r["status"]) for r in lines] == [
        ("check_temperature", True, "pass"), ("check_temperature", False, "fail")]
    assert "multiply" in lines[1]["message"] and lines[1]["failed_case"]


def test_checkers_leave_the_callers_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    ex.check_first_nonfinite(finder(), verbose=False)
    assert torch.equal(torch.rand(3), expected)


LIBRARY = {
    "check_attention": lambda q, k, v, mask: m.scaled_dot_product_attention(q, k, v, mask),
    "check_causal_mask": m.causal_mask,
    "check_padding_mask": m.padding_mask,
    "check_sinusoidal_encoding": m.sinusoidal_encoding,
    "check_rope": rope_ok,
    "check_alibi_slopes": m.alibi_slopes,
    "check_shift_right": m.shift_right,
    "check_label_smoothed_loss": m.label_smoothed_cross_entropy,
    "check_noam": m.noam_lr,
    "check_warmup_cosine": m.warmup_cosine_lr,
    "check_top_k": lambda logits, k: m.TopK(k)(torch.zeros(logits.shape[0], 0, dtype=torch.long), logits),
    "check_top_p": lambda logits, p: m.TopP(p)(torch.zeros(logits.shape[0], 0, dtype=torch.long), logits),
    "check_temperature": lambda logits, t: m.Temperature(t)(torch.zeros(logits.shape[0], 0, dtype=torch.long), logits),
    "check_repetition_penalty": penalty_ok,
    "check_patchify": m.vision.patchify,
    "check_window_partition": m.vision.windows.window_partition,
    "check_online_softmax": m.online_softmax,
    "check_tiled_attention": lambda q, k, v, b, causal: m.tiled_attention(q, k, v, causal=causal, block_q=b, block_k=b),
    "check_pass_at_k": m.evaluation.pass_at_k,
    "check_wilson_interval": m.evaluation.wilson_interval,
}


@pytest.mark.parametrize("name", sorted(LIBRARY))
def test_accepts_the_librarys_own_implementation(name):
    assert ex.CHECKERS[name](LIBRARY[name], verbose=False).passed
