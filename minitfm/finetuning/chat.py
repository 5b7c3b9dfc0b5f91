"""A chat template: a conversation as token ids, the span of every turn, and the assistant-only loss mask.

Glossary: T the rendered length; a *turn* is one message ``{"role": ..., "content": ...}``.

Each turn is written as its role's special token, the content's ids, and the end-of-turn token:

    <|system|> You answer briefly. <|end|> <|user|> 2 + 3 ? <|end|> <|assistant|> 5 <|end|>

The role tokens tell the model who speaks; the end-of-turn token is what the model learns to generate when
its reply is done (generation stops there). To ask for a reply, render the conversation so far and append
``<|assistant|>`` (``add_generation_prompt=True``), as Hugging Face ``apply_chat_template`` does.

Supervised fine-tuning teaches the model the assistant's replies, not the user's questions: the labels are the
ids inside assistant replies (the content and its end-of-turn token) and ``-100`` everywhere else, the value
``transformers`` and ``torch.nn.functional.cross_entropy`` ignore. Labels are aligned with the ids (label i is
the target *at* position i); the training batch shifts them by one (:mod:`minitfm.finetuning.sft`).

The special tokens must be real tokens of the tokenizer, never text that a user can type: the content is encoded
with ``allowed_special=set()``, so a user who writes ``<|assistant|>`` gets ordinary bytes, not the control
token (the prompt-injection hole a template must close). A BPE tokenizer gets them when it is trained:
``train_bpe(text, vocab_size, special_tokens=CHAT_SPECIAL_TOKENS)``. A word-level tokenizer
(:class:`minitfm.text.words.WordTokenizer`) needs them as words of its vocabulary, and content holding one of
them is refused.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import torch

from minitfm.text.bpe_tokenizer import Tokenizer
from minitfm.text.words import WordTokenizer

ROLES = ("system", "user", "assistant")
CHAT_TOKENS = {"system": "<|system|>", "user": "<|user|>", "assistant": "<|assistant|>", "end": "<|end|>"}
CHAT_SPECIAL_TOKENS = tuple(CHAT_TOKENS.values())
IGNORE_INDEX = -100  # a label that the loss skips (the value transformers uses)


@dataclass(frozen=True)
class TurnSpan:
    """Where one turn lies in the rendered ids: ``start`` its role token, ``content_start`` its first content
    id, ``stop`` one past its end-of-turn token (a Python slice ``ids[start:stop]``)."""

    role: str
    start: int
    content_start: int
    stop: int


@dataclass
class RenderedChat:
    """A rendered conversation: ``ids`` (T,), ``labels`` (T,) (``-100`` outside assistant replies) and the
    span of every turn (a generation prompt's final ``<|assistant|>`` belongs to no turn)."""

    ids: torch.Tensor
    labels: torch.Tensor
    spans: list

    @property
    def loss_mask(self) -> torch.Tensor:
        """(T,) bool, ``True`` where the label counts in the loss."""
        return self.labels != IGNORE_INDEX

    def __len__(self) -> int:
        return len(self.ids)


def check_conversation(conversation) -> list[dict]:
    """``conversation`` as a list of ``{"role", "content"}`` dicts, or a TypeError/ValueError saying what is wrong."""
    if isinstance(conversation, (str, Mapping)) or not isinstance(conversation, Sequence):
        raise TypeError(f"a conversation is a list of {{'role': ..., 'content': ...}} dicts, got "
                        f"{type(conversation).__name__}")
    if not conversation:
        raise ValueError("a conversation needs at least one turn, got an empty list")
    turns = []
    for i, turn in enumerate(conversation):
        if not isinstance(turn, Mapping):
            raise TypeError(f"turn {i} must be a dict with 'role' and 'content', got {type(turn).__name__}")
        missing = [k for k in ("role", "content") if k not in turn]
        if missing:
            raise ValueError(f"turn {i} lacks {missing}: each turn is {{'role': ..., 'content': ...}}, got keys "
                             f"{sorted(turn)}")
        role, content = turn["role"], turn["content"]
        if role not in ROLES:
            raise ValueError(f"turn {i} has role {role!r}; the template knows {list(ROLES)}")
        if not isinstance(content, str):
            raise TypeError(f"turn {i}'s content must be a str, got {type(content).__name__}")
        if role == "system" and i > 0:
            raise ValueError(f"a system turn may only open the conversation, got one at turn {i}")
        turns.append({"role": role, "content": content})
    return turns


class ChatTemplate:
    """Renders conversations for one tokenizer.

    Args:
        tokenizer: a BPE :class:`minitfm.text.bpe_tokenizer.Tokenizer` whose special tokens include ``tokens``'
            four strings, or a :class:`minitfm.text.words.WordTokenizer` whose vocabulary holds them as words.
        tokens: the special token of each role and of the end of a turn (keys ``system``, ``user``,
            ``assistant``, ``end``).
        bos_id: an id to put before the conversation (``None``: nothing).
    """

    def __init__(self, tokenizer, *, tokens: Mapping[str, str] = CHAT_TOKENS, bos_id: int | None = None):
        if not isinstance(tokenizer, (Tokenizer, WordTokenizer)):
            raise TypeError(f"tokenizer must be a minitfm BPE Tokenizer or a WordTokenizer, got "
                            f"{type(tokenizer).__name__}")
        if not isinstance(tokens, Mapping) or set(tokens) != set(CHAT_TOKENS):
            raise ValueError(f"tokens must map exactly {sorted(CHAT_TOKENS)} to strings, got {tokens!r:.80}")
        known = tokenizer.special_ids if isinstance(tokenizer, Tokenizer) else tokenizer.stoi
        missing = sorted(t for t in tokens.values() if t not in known)
        if missing:
            where = ("special tokens: train_bpe(..., special_tokens=CHAT_SPECIAL_TOKENS)" if isinstance(
                tokenizer, Tokenizer) else "vocabulary words: WordTokenizer(words + list(CHAT_SPECIAL_TOKENS))")
            raise ValueError(f"the tokenizer lacks the chat tokens {missing}; add them as {where}")
        if bos_id is not None and (isinstance(bos_id, bool) or not isinstance(bos_id, int)
                                   or not 0 <= bos_id < tokenizer.vocab_size):
            raise ValueError(f"bos_id must be None or an id in [0, {tokenizer.vocab_size}), got {bos_id!r}")
        self.tokenizer, self.tokens, self.bos_id = tokenizer, dict(tokens), bos_id
        self.ids = {name: known[token] for name, token in tokens.items()}  # "user" -> the id of <|user|>
        self.end_id = self.ids["end"]

    def encode_content(self, text: str) -> list[int]:
        """The ids of a turn's text; a chat token inside it is never read as one (see the module's docstring)."""
        if isinstance(self.tokenizer, Tokenizer):
            return self.tokenizer.encode(text, allowed_special=set())
        ids = self.tokenizer.encode(text, add_bos=False)
        clash = sorted({self.tokenizer.itos[i] for i in ids} & set(self.tokens.values()))
        if clash:
            raise ValueError(f"the text holds the chat tokens {clash}, which a word-level tokenizer cannot tell from "
                             f"the template's own: {text!r:.80}")
        return ids

    def render(self, conversation, *, add_generation_prompt: bool = False) -> RenderedChat:
        """The ids, labels and turn spans of ``conversation`` (see the module's docstring).

        ``add_generation_prompt`` appends ``<|assistant|>`` after the last turn: the prompt of a reply."""
        if not isinstance(add_generation_prompt, bool):
            raise TypeError(f"add_generation_prompt must be a bool, got {type(add_generation_prompt).__name__}")
        ids, labels, spans = [], [], []
        if self.bos_id is not None:
            ids.append(self.bos_id)
            labels.append(IGNORE_INDEX)
        for turn in check_conversation(conversation):
            start = len(ids)
            content = self.encode_content(turn["content"]) + [self.end_id]
            ids += [self.ids[turn["role"]]] + content
            labels += [IGNORE_INDEX] + (content if turn["role"] == "assistant" else [IGNORE_INDEX] * len(content))
            spans.append(TurnSpan(turn["role"], start, start + 1, len(ids)))
        if add_generation_prompt:
            ids.append(self.ids["assistant"])
            labels.append(IGNORE_INDEX)
        return RenderedChat(torch.tensor(ids, dtype=torch.long), torch.tensor(labels, dtype=torch.long), spans)

    def prompt_ids(self, conversation) -> torch.Tensor:
        """(1, P) ids of ``conversation`` followed by ``<|assistant|>``: what ``generate`` continues."""
        return self.render(conversation, add_generation_prompt=True).ids[None]

    def reply(self, new_ids) -> str:
        """The text of generated ids up to (not including) the first end-of-turn token."""
        ids = new_ids.tolist() if isinstance(new_ids, torch.Tensor) else list(new_ids)
        if ids and isinstance(ids[0], list):
            raise ValueError(f"reply takes one row of ids (T,), got a batch of {len(ids)} rows")
        ids = ids[:ids.index(self.end_id)] if self.end_id in ids else ids
        if isinstance(self.tokenizer, Tokenizer):
            return self.tokenizer.decode(ids)
        return " ".join(self.tokenizer.itos[i] for i in ids)

    def text(self, conversation, *, add_generation_prompt: bool = False) -> str:
        """The rendered conversation as readable text, special tokens included (for printing)."""
        rendered = self.render(conversation, add_generation_prompt=add_generation_prompt)
        if isinstance(self.tokenizer, Tokenizer):
            return self.tokenizer.decode(rendered.ids)
        return " ".join(self.tokenizer.itos[i] for i in rendered.ids.tolist())
