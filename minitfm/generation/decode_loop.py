"""Generation: greedy decoding, sampling and beam search, with or without a KV cache.

Glossary: B batch, P prompt length (left-padded), N new tokens, K beams, V vocabulary, S source length.

One loop serves every strategy. Each step asks the model for the next-token logits (B, V) of every
row, runs the logits processors (:mod:`minitfm.generation.sampling`), then takes the argmax (greedy) or samples.

- **Without a cache** (``use_cache=False``) every step re-runs the model on the whole sequence so far:
  step t runs P + t token positions, so the whole generation processes a quadratic number of positions,
  and attention, which scores every pair of them at every step, does cubic work.
- **With a cache** the first step (the *prefill*) runs the prompt once and stores every layer's keys
  and values; each later step (*decode*) runs only the newest token against the cached keys/values.
  ``cache_cls`` picks :class:`~minitfm.layers.kv_cache.KVCache` (preallocated, constant cost per step) or
  :class:`~minitfm.layers.kv_cache.ConcatKVCache` (grows with ``torch.cat``, copies the history every step).

Both give the same tokens. ``step_times`` in the output records the seconds of every step, so the
three can be compared step by step.

Prompts of different lengths are padded on the **left** (``pad_id``) so that all rows continue in the
same column; a key mask hides the padding and positions count real tokens only, so a padded row
generates exactly what it would alone. A row stops at ``eos_id``; later columns of that row hold
``pad_id``. The loop ends when every row has stopped or after ``max_new_tokens``.
"""
from __future__ import annotations

import dataclasses
import time
import warnings
from dataclasses import dataclass, field
from typing import Sequence

import torch

from minitfm._checks import check_positive_int, check_tensor
from minitfm.generation._decode_checks import (_check_decoder, _check_flags, _check_inputs, _check_sampling_args,
                                               _special_ids)
from minitfm.generation.lean_decode import LeanDecoder
from minitfm.generation.lean_refusal import refusal
from minitfm.generation.sampling import LogitsProcessor, Temperature, TopK, TopP, apply_processors
from minitfm.layers.kv_cache import KVCache
from minitfm.models import EncoderDecoder


@dataclass
class GenerationOutput:
    """What :func:`generate` returns.

    Attributes:
        tokens: (B, P + N) the (left-padded) prompt followed by the generated tokens.
        prompt_len: P, so ``tokens[:, prompt_len:]`` are the new tokens.
        finished: (B,) bool, whether each row produced (one of) ``eos_id``.
        step_times: seconds per step; step 0 includes the prefill of the whole prompt.
        logits: (B, N, V) the model's raw logits at every step (before processors), if requested.
    """

    tokens: torch.Tensor
    prompt_len: int
    finished: torch.Tensor
    step_times: list = field(default_factory=list)
    logits: torch.Tensor | None = None

    @property
    def new_tokens(self) -> torch.Tensor:
        """(B, N) the generated part."""
        return self.tokens[:, self.prompt_len:]


class _NextLogits:
    """Next-token logits for a growing batch of sequences, from either model kind, cached or not.

    ``__call__(tokens (B, T), valid (B, T)) -> (B, V)`` with ``valid`` True for real (non-padding)
    tokens. With a cache only the tokens not yet cached are fed to the model; a decoder-only model's
    one-token steps after the prefill go through :class:`~minitfm.generation.lean_decode.LeanDecoder` (the same function
    as one flat list of tensor operations, without module calls or per-step checks) unless the model needs its
    modules: ``decoder`` (the caller's) if given, else the model's own (:meth:`LeanDecoder.of`).
    """

    def __init__(self, model, src, batch_size: int, total_len: int, use_cache: bool, cache_cls, decoder=None):
        self.model = model
        self.encoder_decoder = isinstance(model, EncoderDecoder)
        self.caches = self.lean = None
        if self.encoder_decoder:
            self.memory, self.src_mask = model.encode(src)  # (B, S, D), (B, 1, 1, S): once for all steps
        if use_cache:
            # a decoder-only model's sliding-window layers keep only their window (a SlidingKVCache) unless the caller
            # asked for another cache class than the default
            extra = {"memory_len": src.shape[1]} if self.encoder_decoder else {"bounded": cache_cls is KVCache}
            self.caches = model.new_caches(batch_size, total_len, cache_cls, **extra)
            if not self.encoder_decoder and refusal(model) is None:  # checked now, in eval mode, on every call
                # the model's own decoder, built at the first call and rebuilt only when the model changed
                self.lean = LeanDecoder._owned(model, total_len) if decoder is None else decoder

    def __call__(self, tokens: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        past = 0 if self.caches is None else self.caches[0].length
        new = tokens[:, past:]  # (B, T) -> (B, T - past): everything (no cache) or the uncached tail
        if self.encoder_decoder:
            logits = self.model.decode(new, self.memory, self.src_mask, caches=self.caches)
        else:
            key_mask = None if bool(valid.all()) else valid  # without padding, positions and mask are the defaults
            if self.lean is not None and past > 0 and new.shape[1] == 1:
                return self.lean._step(new, self.caches, key_mask)  # a decode step: (B, 1) -> (B, V)
            logits = self.model(new, caches=self.caches, key_mask=key_mask)
        return logits[:, -1]  # (B, T_new, V) -> (B, V): only the last position predicts the next token

    def reorder(self, rows: torch.Tensor) -> None:
        """Keep batch rows ``rows`` of every cache and of the encoder output (beam search)."""
        if self.caches is not None:
            for cache in self.caches:
                cache.reorder(rows)
        if self.encoder_decoder:
            self.memory, self.src_mask = self.memory[rows], self.src_mask[rows]


def _prompt_valid(model, prompt: torch.Tensor, pad_id: int | None, prompt_mask=None) -> torch.Tensor:
    """(B, P) True for real prompt tokens: ``prompt_mask`` when given, else ``prompt != pad_id`` (all of them
    for a model without a padding token). Every row needs at least one."""
    if prompt_mask is not None:
        check_tensor(prompt_mask, "prompt_mask", ndim=2)
        if prompt_mask.dtype != torch.bool or prompt_mask.shape != prompt.shape:
            raise ValueError(f"prompt_mask must be bool with the prompt's shape {tuple(prompt.shape)}, True = real "
                             f"token, got {prompt_mask.dtype} {tuple(prompt_mask.shape)}")
        valid = prompt_mask.to(prompt.device)
    elif pad_id is None:
        valid = torch.ones_like(prompt, dtype=torch.bool)
    else:
        valid = prompt != pad_id
    if not valid.any(dim=1).all():
        if prompt_mask is not None:
            raise ValueError("every prompt row needs at least one real token: a row of prompt_mask is all False")
        raise ValueError(f"every prompt row needs at least one token that is not pad_id={pad_id} (start from <bos>)")
    if not valid[:, -1].all():  # right padding: the next token would be predicted from a pad position
        row = int((~valid[:, -1]).nonzero()[0, 0])
        last = int(valid[row].nonzero()[-1, 0])
        what = "prompt_mask" if prompt_mask is not None else f"the prompt (pad_id={pad_id})"
        raise ValueError(f"{what} must be left-padded: row {row} has a pad at position {last + 1} after a real token "
                         f"(its last real token is at position {last} of {prompt.shape[1]}); generation continues "
                         f"from the last column, so pad on the left (a masked token between real ones is fine)")
    if isinstance(model, EncoderDecoder) and not valid.all():
        raise ValueError("EncoderDecoder prompts cannot be padded: give every row the same decoder prefix, "
                         "usually just <bos>")
    return valid


def _choose(logits, tokens, processors, do_sample: bool, generator) -> torch.Tensor:
    """(B, V) raw logits -> (B,) next tokens."""
    logits = apply_processors(tokens, logits, processors)
    if not do_sample:
        return logits.argmax(dim=-1)
    probs = logits.float().softmax(dim=-1)
    if generator is not None and generator.device.type != probs.device.type:
        # a CPU generator with a model on a GPU: draw on the generator's device (the same draws on every device)
        return torch.multinomial(probs.to(generator.device), 1, generator=generator).squeeze(-1).to(probs.device)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (B, 1) -> (B,)


def generate(model, prompt: torch.Tensor, max_new_tokens: int, *, src: torch.Tensor | None = None,
             processors: Sequence[LogitsProcessor] = (), do_sample: bool = False,
             generator: torch.Generator | None = None, eos_id=None, pad_id: int | None = None,
             use_cache: bool = True, cache_cls=KVCache, return_logits: bool = False,
             clock=time.perf_counter, prompt_mask: torch.Tensor | None = None,
             decoder: LeanDecoder | None = None, num_return_sequences: int = 1) -> GenerationOutput:
    """Generate up to ``max_new_tokens`` tokens after ``prompt`` for every row of the batch.

    Args:
        model: a :class:`~minitfm.models.DecoderOnlyLM`, or an :class:`~minitfm.models.EncoderDecoder`
            together with ``src``. It is put in eval mode (no dropout) and restored afterwards.
        prompt: (B, P) token ids, left-padded with ``pad_id``. For an EncoderDecoder, the decoder's
            start (usually a column of <bos>), unpadded.
        src: (B, S) source ids for an EncoderDecoder (right padding is fine; the encoder masks it).
        processors: logits processors applied in order each step (see :mod:`minitfm.generation.sampling`).
        do_sample: sample from the processed distribution; ``False`` takes the argmax (greedy).
        generator: a seeded ``torch.Generator`` makes sampling reproducible; a CPU one also serves a model on a
            GPU (the draw is made on the CPU, so a seed gives the same tokens on every device).
        eos_id, pad_id: default to ``model.config.eos_id`` / ``model.config.pad_id``; ids in the vocabulary.
            ``eos_id`` may be several ids (a list, tuple, set or 1-D tensor): a row stops at any of them (Llama 3
            Instruct's turn ends with <|eot_id|>, its text with <|end_of_text|>). ``eos_id=-1`` turns stopping off:
            every row generates exactly ``max_new_tokens`` tokens. A model without a padding token
            (``pad_id=None``) fills a stopped row with the (first) eos id.
        use_cache: reuse keys/values (fast) or recompute the whole prefix every step (slow, simple).
        cache_cls: :class:`~minitfm.layers.kv_cache.KVCache` or :class:`~minitfm.layers.kv_cache.ConcatKVCache`.
            With the default, a decoder-only model's sliding-window layers get a
            :class:`~minitfm.layers.kv_cache.SlidingKVCache`, which holds only their window.
        return_logits: also return the raw (B, N, V) logits of every step.
        clock: the timer of ``step_times``: wall time by default; ``time.process_time`` counts only this
            process's CPU time, a steadier measure on a machine shared with other jobs.
        prompt_mask: (B, P) bool, ``True`` = real token; overrides ``prompt != pad_id`` (a model without a
            padding token can still take a left-padded batch). Padding goes on the left: a row whose last
            column is not a real token (right padding) raises ``ValueError``, since the next token would be
            predicted from a pad position; a masked token between real ones is hidden, as ``transformers``
            hides it.
        decoder: a :class:`~minitfm.generation.lean_decode.LeanDecoder` of ``model`` that the caller built
            (``LeanDecoder.build(model)``) and holds. Rarely needed: without it ``generate`` uses the model's own
            decoder (:meth:`LeanDecoder.of`), built at the first call and rebuilt only when the model changed.
            Rebuild yours after you change the model: a decoder whose model changed since it was built (a module
            or parameter replaced, moved or cast, a parameter written in place, even through ``p.data``, an
            attention setting changed; :meth:`LeanDecoder.is_current`) raises ``ValueError``.
        num_return_sequences: G rows per prompt row, adjacent (row ``i * G + g`` continues prompt row ``i``), as
            ``transformers`` names it: each prompt is read once (one prefill of B rows), then its cache and next-token
            logits are copied to its G rows, which continue on their own (drawn from ``generator``, as B * G
            repeated prompt rows would be). The output has B * G rows. Sampling G answers to a question (pass@k,
            GRPO's groups) then costs one prefill per question, not G.

    The loop runs under ``torch.inference_mode``; the tensors it returns are ordinary ones. With a cache, a
    DecoderOnlyLM's decode steps run through :class:`~minitfm.generation.lean_decode.LeanDecoder` (``decoder``, or the
    model's own, kept between calls: it holds a copy of the q, k, v and gate/up matrices, :meth:`LeanDecoder.nbytes`,
    until :meth:`LeanDecoder.release` or the model goes), which computes what the modules compute (to rounding) with
    far less overhead; a
    model with hooks or in half precision, or one with a module the lean step does not know exactly (a LoRA
    adapter, a quantised layer), runs every step through its modules, even when ``decoder`` is given.
    """
    _check_inputs(model, prompt, max_new_tokens, src)
    _check_flags(cache_cls, clock, use_cache=use_cache, return_logits=return_logits)
    _check_decoder(model, decoder, use_cache)
    eos_id, pad_id, fill_id = _special_ids(model, eos_id, pad_id)
    _check_sampling_args(processors, do_sample, generator)
    check_positive_int(num_return_sequences, "num_return_sequences")
    valid = _prompt_valid(model, prompt, pad_id, prompt_mask)
    if not do_sample and any(isinstance(p, (Temperature, TopK, TopP)) for p in processors):
        warnings.warn("Temperature, TopK and TopP never change the argmax; pass do_sample=True to sample",
                      stacklevel=2)
    return _for_inference(model, _generate_loop, prompt, valid, max_new_tokens, src, processors, do_sample,
                          generator, eos_id, fill_id, use_cache, cache_cls, return_logits, clock, decoder,
                          num_return_sequences)


def _for_inference(model, loop, *args):
    """``loop(model, *args)`` in eval mode (no dropout) and inference mode (no autograd bookkeeping: a decode
    step is ~200 small operations); the model's mode is restored, and every tensor of the output dataclass is
    copied out of inference mode so that it can feed training later (an inference tensor cannot be saved for
    a backward pass)."""
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            out = loop(model, *args)
    finally:
        model.train(was_training)
    return dataclasses.replace(out, **{f.name: getattr(out, f.name).clone() for f in dataclasses.fields(out)
                                       if isinstance(getattr(out, f.name), torch.Tensor)})


def _generate_loop(model, prompt, valid, max_new_tokens, src, processors, do_sample, generator,
                   eos_id, fill_id, use_cache, cache_cls, return_logits, clock, decoder=None,
                   repeat: int = 1) -> GenerationOutput:
    tokens = prompt
    next_logits = _NextLogits(model, src, prompt.shape[0], prompt.shape[1] + max_new_tokens, use_cache, cache_cls,
                              decoder)
    finished = torch.zeros(prompt.shape[0] * repeat, dtype=torch.bool, device=prompt.device)
    eos_ids = torch.tensor(eos_id, dtype=prompt.dtype, device=prompt.device)  # (E,) every id that ends a row
    step_times, all_logits = [], []
    for step in range(max_new_tokens):
        start = clock()
        logits = next_logits(tokens, valid)  # (B, V)
        if step == 0 and repeat > 1:  # each prompt was read once: its cache and logits now serve its `repeat` rows
            rows = torch.arange(prompt.shape[0], device=prompt.device).repeat_interleave(repeat)  # (B G,)
            next_logits.reorder(rows)
            tokens, valid, logits = tokens[rows], valid[rows], logits[rows]
        chosen = _choose(logits, tokens, processors, do_sample, generator)  # (B,)
        chosen = chosen.masked_fill(finished, fill_id)  # a row that stopped only pads
        tokens = torch.cat([tokens, chosen[:, None]], dim=1)  # (B, T) -> (B, T + 1)
        valid = torch.cat([valid, ~finished[:, None]], dim=1)
        finished = finished | torch.isin(chosen, eos_ids)
        step_times.append(clock() - start)
        if return_logits:
            all_logits.append(logits)
        if finished.all():
            break
    return GenerationOutput(tokens, prompt.shape[1], finished, step_times,
                            torch.stack(all_logits, dim=1) if return_logits else None)  # N x (B, V) -> (B, N, V)


