"""Two prompt formats for one multiple-choice item: the cloze form and lettered choices.

**Cloze form** (``multiple_choice.score_choices``): the model reads the question and scores each choice's own text
as the continuation; it never sees the other choices. Any language model can be asked this way.

**Lettered choices** (what OLMES, Gu et al. 2024, "OLMES: A Standard for Language Model Evaluations", call the
multiple-choice formulation, MCF): the prompt lists every choice after a label, then asks for the label, and the
model scores only the labels as continuations. This is lm-eval's MMLU template (``lm_eval/tasks/mmlu/default/
_default_template_yaml``, lm-eval 0.4.13)::

    {{question.strip()}}\\nA. {{choices[0]}}\\nB. {{choices[1]}}\\nC. {{choices[2]}}\\nD. {{choices[3]}}\\nAnswer:

with ``doc_to_choice: ["A", "B", "C", "D"]``, each scored after lm-eval's default target delimiter, a space. To
answer, the model must tie each label to its choice and then write a label: a skill of its own, which OLMES
reports that small base models lack (they score near chance in this form while the cloze form shows what they
know), and which larger models learn. The same model and the same items can therefore get two different scores;
a score means something only with its format named.

``labels`` and ``cue`` exist because a tokenizer must be able to write them: a word tokenizer without letters maps
"A." and "Answer:" to one unknown token, which would make every label score the same.
"""
from __future__ import annotations

from minitfm.evaluation.multiple_choice import ChoiceScores, score_choices

__all__ = ["LETTERS", "lettered_prompt", "score_lettered"]

LETTERS = ("A", "B", "C", "D")


def _check_labels(choices, labels) -> list:
    if isinstance(choices, str) or len(choices) == 0:
        raise ValueError(f"choices must be a non-empty list of strings, got {choices!r}")
    if isinstance(labels, str):
        labels = list(labels)
    if len(labels) < len(choices):
        raise ValueError(f"need a label for each of the {len(choices)} choices, got {len(labels)} labels {labels!r}")
    labels = list(labels[:len(choices)])
    if any(not isinstance(x, str) or not x.strip() for x in labels) or len(set(labels)) != len(labels):
        raise ValueError(f"labels must be distinct non-empty strings, got {labels!r}")
    return labels


def lettered_prompt(context: str, choices, labels=LETTERS, *, separator: str = ". ", cue: str = "Answer:") -> str:
    """The prompt of lettered choices: the context, one line ``label + separator + choice`` per choice, then
    ``cue`` on its own line (left out when empty). With the defaults it is lm-eval's MMLU ``doc_to_text``."""
    if not isinstance(context, str) or not context.strip():
        raise ValueError(f"context must be a non-empty str, got {context!r}")
    labels = _check_labels(choices, labels)
    if any(not isinstance(c, str) or not c for c in choices):
        raise ValueError(f"choices must be non-empty strings, got {list(choices)!r}")
    lines = [context.strip()] + [f"{label}{separator}{choice}" for label, choice in zip(labels, choices)]
    return "\n".join(lines + ([cue] if cue else []))


def score_lettered(model, tokenizer, context: str, choices, labels=LETTERS, *, separator: str = ". ",
                   cue: str = "Answer:") -> ChoiceScores:
    """Score the *labels* as continuations of ``lettered_prompt(...)`` (each after a space, as lm-eval does);
    ``predict("sum")`` is then the index of the label the model writes most readily."""
    labels = _check_labels(choices, labels)
    prompt = lettered_prompt(context, choices, labels, separator=separator, cue=cue)
    return score_choices(model, tokenizer, prompt, labels)
