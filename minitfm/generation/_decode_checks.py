"""What ``generate`` and ``beam_search`` check before they decode (:mod:`minitfm.generation.decode_loop`): the model
and the prompt, the special ids (one or several eos ids), the sampling arguments, the flags and a caller's decoder.
Each raises a TypeError or ValueError that names what was expected and what arrived.

Glossary: B batch, P prompt length, S source length, V vocabulary.
"""
from __future__ import annotations

import torch

from minitfm._checks import check_number, check_positive_int, check_tensor, check_token_ids
from minitfm.generation.lean_decode import LeanDecoder
from minitfm.generation.sampling import LogitsProcessor
from minitfm.layers.kv_cache import KVCache
from minitfm.models import DecoderOnlyLM, EncoderDecoder


def _check_inputs(model, prompt, max_new_tokens, src) -> None:
    if not isinstance(model, (DecoderOnlyLM, EncoderDecoder)):
        raise TypeError(f"model must be a DecoderOnlyLM or an EncoderDecoder, got {type(model).__name__}")
    check_tensor(prompt, "prompt", ndim=2)
    if prompt.is_floating_point() or prompt.numel() == 0:
        raise ValueError(f"prompt must be a non-empty (B, P) tensor of token ids, got {prompt.dtype} {tuple(prompt.shape)}")
    check_token_ids(prompt, "prompt")
    if src is not None:
        check_token_ids(src, "src")
    check_positive_int(max_new_tokens, "max_new_tokens")
    if prompt.device != next(model.parameters()).device:
        raise ValueError(f"prompt is on {prompt.device}, the model on {next(model.parameters()).device}; "
                         "move one with .to(device)")
    if src is not None and src.device != prompt.device:
        raise ValueError(f"src is on {src.device}, prompt on {prompt.device}; move one with .to(device)")
    if isinstance(model, EncoderDecoder) and src is None:
        raise ValueError("an EncoderDecoder needs the source: pass src=(B, S) token ids")
    if isinstance(model, DecoderOnlyLM) and src is not None:
        raise ValueError("a DecoderOnlyLM has no encoder; do not pass src")
    if src is not None and src.shape[0] != prompt.shape[0]:
        raise ValueError(f"src and prompt must share B, got {tuple(src.shape)} and {tuple(prompt.shape)}")
    total, limit = prompt.shape[1] + max_new_tokens, model.config.max_seq_len
    if total > limit:
        raise ValueError(f"prompt length {prompt.shape[1]} + max_new_tokens {max_new_tokens} = {total} "
                         f"exceeds the model's max_seq_len={limit}")


def _eos_ids(eos_id, vocab: int) -> tuple[int, ...]:
    """``eos_id`` as a tuple of ids: one id, several (a list, tuple, set or 1-D integer tensor: Llama 3 Instruct
    ends a turn with <|eot_id|> and a text with <|end_of_text|>), or ``-1``: none, never stop early (``()``)."""
    if isinstance(eos_id, torch.Tensor):
        if eos_id.dim() > 1 or eos_id.is_floating_point() or eos_id.is_complex() or eos_id.dtype == torch.bool:
            raise TypeError(f"eos_id as a tensor must be a 0-D or 1-D integer tensor of ids, got {eos_id.dtype} "
                            f"{tuple(eos_id.shape)}")
        eos_id = eos_id.tolist()
    if isinstance(eos_id, (list, tuple, set, frozenset)):
        ids = sorted(eos_id) if isinstance(eos_id, (set, frozenset)) else list(eos_id)
        if not ids:
            raise ValueError("eos_id must hold at least one id (or be -1: never stop early), got an empty "
                             f"{type(eos_id).__name__}")
        for i in ids:
            check_number(i, "every id of eos_id", low=0, high=vocab - 1, integer=True)
        return tuple(dict.fromkeys(ids))
    check_number(eos_id, "eos_id", low=-1, high=vocab - 1, integer=True)
    return () if eos_id == -1 else (eos_id,)


def _special_ids(model, eos_id, pad_id) -> tuple[tuple[int, ...], int | None, int]:
    """The eos ids and pad id to use, the config's unless given (``eos_id=-1`` means "never stop early": no eos
    id), and the id that fills a row after it stopped: ``pad_id``, or the first eos id for a model without a
    padding token (``pad_id=None``, as GPT-2 and Llama)."""
    vocab = model.config.vocab_size
    eos_ids = _eos_ids(model.config.eos_id if eos_id is None else eos_id, vocab)
    pad_id = model.config.pad_id if pad_id is None else pad_id
    if pad_id is not None:
        check_number(pad_id, "pad_id", low=0, high=vocab - 1, integer=True)
    return eos_ids, pad_id, (pad_id if pad_id is not None else eos_ids[0] if eos_ids else 0)


def _check_sampling_args(processors, do_sample, generator) -> None:
    if not isinstance(do_sample, bool):
        raise TypeError(f"do_sample must be a bool, got {type(do_sample).__name__}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator (e.g. torch.Generator().manual_seed(0)) or None, "
                        f"got {type(generator).__name__}")
    if isinstance(processors, LogitsProcessor) or not isinstance(processors, (list, tuple)):
        raise TypeError(f"processors must be a list of logits processors, got {type(processors).__name__}")
    for p in processors:
        if not callable(p):
            raise TypeError(f"every processor must be callable as p(tokens, logits), got {type(p).__name__}")


def _check_flags(cache_cls=KVCache, clock=None, **flags) -> None:
    """The flags are bools, ``cache_cls`` a KVCache class (KVCache, ConcatKVCache or a subclass), ``clock`` callable."""
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be a bool, got {type(value).__name__} ({value!r:.40})")
    if not (isinstance(cache_cls, type) and issubclass(cache_cls, KVCache)):
        raise TypeError(f"cache_cls must be a cache class, KVCache or ConcatKVCache (not an instance), got "
                        f"{cache_cls!r:.60}")
    if clock is not None and not callable(clock):
        raise TypeError(f"clock must be a function returning seconds (e.g. time.perf_counter), "
                        f"got {type(clock).__name__}")


def _check_decoder(model, decoder, use_cache: bool) -> None:
    """A caller's decoder must be a LeanDecoder of this very model, with the parameters it copied."""
    if decoder is None:
        return
    if not isinstance(decoder, LeanDecoder):
        raise TypeError(f"decoder must be a LeanDecoder (LeanDecoder.build(model)) or None, "
                        f"got {type(decoder).__name__}")
    if decoder.model is not model:
        raise ValueError("decoder was built for another model: build one with LeanDecoder.build(model) for this model")
    if not use_cache:
        raise ValueError("decoder= serves the cached decode steps; it needs use_cache=True")
    if not decoder.is_current():
        raise ValueError("the model changed since the decoder was built (a module or parameter replaced, moved, "
                         "cast, or written in place, e.g. by an optimizer step or load_state_dict): rebuild it with "
                         "LeanDecoder.build(model)")
