"""Asking a chat model: replies to many questions at once, scored by the tasks' checks.

Glossary: B questions in a batch, P the longest prompt, N new tokens at most.

The prompts are rendered by the chat template with the generation prompt (``... <|assistant|>``), left-padded
so that every row's next token is predicted at the last column, and decoded greedily with the KV cache until
each row writes the end-of-turn token. Greedy decoding makes a score a property of the model, not of a
sampler's luck; :func:`reply` samples when a temperature is given (the chat widget's choice).
"""
from __future__ import annotations

from typing import Sequence

import torch

from minitfm._checks import check_number, check_positive_int
from minitfm.data import pad_sequences
from minitfm.finetuning.chat import ChatTemplate
from minitfm.finetuning.tasks import Example, is_correct, statement_prefix
from minitfm.generation import generate
from minitfm.generation.sampling import Temperature, TopK


def _check(model, template) -> None:
    if not isinstance(template, ChatTemplate):
        raise TypeError(f"template must be a ChatTemplate, got {type(template).__name__}")
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a minitfm DecoderOnlyLM, got {type(model).__name__}")


def _device(model) -> torch.device:
    """Where the model's weights are: the ids a helper builds go there (a model on a GPU gets GPU ids)."""
    first = next(model.parameters(), None) if isinstance(model, torch.nn.Module) else None
    return torch.device("cpu") if first is None else first.device


def left_padded(rows, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Id rows -> (B, P) ids left-padded with 0 and the (B, P) mask of real tokens, both on ``device``: prompts laid
    out for ``generate``, each row's next token predicted at the last column."""
    lengths = torch.tensor([len(r) for r in rows], device=device)
    ids = pad_sequences(list(rows), 0, side="left").to(device)  # (B, P)
    real = torch.arange(ids.shape[1], device=device)[None, :] >= (ids.shape[1] - lengths)[:, None]  # True = real
    return ids, real


def replies(model, template: ChatTemplate, conversations: Sequence, *, max_new_tokens: int = 32,
            batch_size: int = 128, return_finished: bool = False):
    """The greedy reply of ``model`` to each conversation (a list of turns ending with the user's).

    With ``return_finished``, also a list of bools: whether each reply ended with the end-of-turn token within
    ``max_new_tokens`` (a base model never does: it has never seen one)."""
    _check(model, template)
    check_positive_int(max_new_tokens, "max_new_tokens")
    check_positive_int(batch_size, "batch_size")
    if isinstance(conversations, (str, dict)) or not isinstance(conversations, Sequence) or not conversations:
        raise TypeError("conversations must be a non-empty list of conversations (lists of turns)")
    prompts = [template.render(c, add_generation_prompt=True).ids for c in conversations]
    if not isinstance(return_finished, bool):
        raise TypeError(f"return_finished must be a bool, got {type(return_finished).__name__}")
    out, finished, device = [], [], _device(model)
    for i in range(0, len(prompts), batch_size):
        ids, real = left_padded(prompts[i:i + batch_size], device)  # (B, P) each
        result = generate(model, ids, max_new_tokens, eos_id=template.end_id, prompt_mask=real)
        out += [template.reply(row) for row in result.tokens[:, result.prompt_len:]]
        finished += result.finished.tolist()
    return (out, finished) if return_finished else out


def completions(model, tokenizer, prefixes: Sequence[str], max_new_tokens: int, *, bos_id: int,
                batch_size: int = 128) -> list[str]:
    """Greedy continuations of plain-text ``prefixes`` (no chat template), each read after ``bos_id``, exactly
    ``max_new_tokens`` tokens each (no early stop), decoded to text."""
    check_positive_int(max_new_tokens, "max_new_tokens")
    if isinstance(prefixes, str) or not prefixes:
        raise TypeError("prefixes must be a non-empty list of str")
    out, device = [], _device(model)
    for i in range(0, len(prefixes), batch_size):
        chunk = [torch.tensor([bos_id] + tokenizer.encode(p)) for p in prefixes[i:i + batch_size]]
        ids, real = left_padded(chunk, device)  # (B, P) each
        result = generate(model, ids, max_new_tokens, eos_id=-1, prompt_mask=real)
        out += [tokenizer.decode(row.tolist()) for row in result.tokens[:, result.prompt_len:]]
    return out


def statement_recall(model, tokenizer, task: str, facts: Sequence[dict], *, bos_id: int) -> list[bool]:
    """For each fact, whether the model completes its plain statement cut before the answer (``"17 + 25 = "``)
    with the rest (``"42."``): what the base model knows, in the form it read it. Greedy, batched."""
    pieces = [statement_prefix(task, f) for f in facts]
    longest = max(len(rest.encode("utf-8")) for _, rest in pieces)
    texts = completions(model, tokenizer, [prefix for prefix, _ in pieces], longest, bos_id=bos_id)
    return [text.startswith(rest) for text, (_, rest) in zip(texts, pieces)]


def score(model, template: ChatTemplate, examples: Sequence[Example], *, max_new_tokens: int = 32) -> list[bool]:
    """For each example, whether the model's greedy reply to its question is exactly its answer (a list of
    bools in the examples' order, ready for an interval or a paired test)."""
    if not examples or not all(isinstance(e, Example) for e in examples):
        raise TypeError("examples must be a non-empty list of minitfm.finetuning.tasks.Example")
    answers = replies(model, template, [e.chat(with_answer=False) for e in examples], max_new_tokens=max_new_tokens)
    return [is_correct(e, a) for e, a in zip(examples, answers)]


def sampled_replies(model, template: ChatTemplate, conversations: Sequence, n: int, *, temperature: float = 1.0,
                    seed: int = 0, max_new_tokens: int = 16, batch_size: int = 256) -> list[list[str]]:
    """``n`` sampled replies to each conversation (a list of ``n`` str per conversation), drawn at ``temperature``
    from one seeded CPU generator, batched: the material of pass@k and of answer diversity. A batch holds the
    ``n`` rows of whole conversations, at most ``batch_size`` rows (at least one conversation); each prompt is
    read once and its cache copied to its ``n`` rows (``generate``'s ``num_return_sequences``)."""
    _check(model, template)
    check_positive_int(n, "n")
    check_number(temperature, "temperature", low=0.0, low_open=True)
    if isinstance(conversations, (str, dict)) or not isinstance(conversations, Sequence) or not conversations:
        raise TypeError("conversations must be a non-empty list of conversations (lists of turns)")
    check_positive_int(batch_size, "batch_size")
    prompts = [template.render(c, add_generation_prompt=True).ids for c in conversations]
    out, device, generator = [], _device(model), torch.Generator().manual_seed(seed)
    per_batch = max(1, batch_size // n)  # whole conversations: batch_size rows when n divides it
    for i in range(0, len(prompts), per_batch):
        ids, real = left_padded(prompts[i:i + per_batch], device)  # (Q, P) each, then Q n rows
        result = generate(model, ids, max_new_tokens, processors=[Temperature(temperature)], do_sample=True,
                          generator=generator, eos_id=template.end_id, prompt_mask=real, num_return_sequences=n)
        out += [template.reply(row) for row in result.tokens[:, result.prompt_len:]]
    return [out[j * n:(j + 1) * n] for j in range(len(conversations))]


def reply(model, template: ChatTemplate, conversation, *, max_new_tokens: int = 48, temperature: float = 0.0,
          top_k: int | None = None, seed: int = 0) -> str:
    """One reply: greedy at ``temperature=0``, else sampled (with ``top_k`` if given) from a seeded generator."""
    _check(model, template)
    check_number(temperature, "temperature", low=0.0)
    if temperature == 0:
        return replies(model, template, [conversation], max_new_tokens=max_new_tokens)[0]
    processors = [Temperature(temperature)] + ([TopK(top_k)] if top_k else [])
    prompt = template.prompt_ids(conversation).to(_device(model))  # (1, P)
    # a CPU generator on every device: one seed, one reply, whether the model is on the CPU or a GPU
    result = generate(model, prompt, max_new_tokens, processors=processors, do_sample=True,
                      generator=torch.Generator().manual_seed(seed), eos_id=template.end_id)
    return template.reply(result.tokens[0, result.prompt_len:])
