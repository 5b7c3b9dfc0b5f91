"""Answer extraction for generated answers: lm-eval's regex filter, strict and flexible.

A generative task (GSM8K, Cobbe et al. 2021, "Training Verifiers to Solve Math Word Problems"; a chat model's
reply) gets free text back, and a grader must first pull the answer out of it. lm-eval does that with a *filter*, then compares the result to the reference by exact match. Its GSM8K
task (``lm_eval/tasks/gsm8k/gsm8k.yaml``, lm-eval 0.4.13) reports two filters of the same generations:

- ``strict-match``: the regex ``#### (\\-?[0-9\\.\\,]+)``, the format the few-shot examples teach; an answer
  written any other way counts as wrong;
- ``flexible-extract``: the regex ``(-?[$0-9.,]{2,})|(-?[0-9]+)`` with ``group_select: -1``: the *last* number
  anywhere in the reply.

Both then ``take_first`` response. The two scores of one model can differ widely: the gap is the format, not the
arithmetic. ``regex_extract`` follows lm-eval's ``RegexFilter.apply`` (``lm_eval/filters/extraction.py``) for one
response: ``re.findall``; no match gives ``fallback``; otherwise the match at ``group_select`` (Python indexing,
so -1 is the last); a match with several groups keeps its first non-empty group (or ``fallback``); the result is
stripped. A ``group_select`` past the matches also gives ``fallback`` here, where lm-eval raises IndexError.
"""
from __future__ import annotations

import re

__all__ = ["STRICT_MATCH", "FLEXIBLE_EXTRACT", "regex_extract"]

STRICT_MATCH = r"#### (\-?[0-9\.\,]+)"  # GSM8K's strict-match, group_select 0
FLEXIBLE_EXTRACT = r"(-?[$0-9.,]{2,})|(-?[0-9]+)"  # GSM8K's flexible-extract, used with group_select=-1


def regex_extract(response, pattern: str, *, group_select: int = 0, fallback: str = "[invalid]") -> str:
    """The answer that ``pattern`` finds in one ``response``, as lm-eval's regex filter extracts it."""
    if not isinstance(pattern, (str, re.Pattern)):
        raise TypeError(f"pattern must be a regex str or compiled pattern, got {type(pattern).__name__}")
    if isinstance(group_select, bool) or not isinstance(group_select, int):
        raise TypeError(f"group_select must be an int (Python indexing, -1 = the last match), got {group_select!r}")
    if not isinstance(fallback, str):
        raise TypeError(f"fallback must be a str, got {type(fallback).__name__}")
    regex = re.compile(pattern) if isinstance(pattern, str) else pattern
    matches = regex.findall(response if isinstance(response, str) else "")  # lm-eval reads a non-str as ""
    if not matches or not -len(matches) <= group_select < len(matches):
        return fallback
    match = matches[group_select]
    if isinstance(match, tuple):  # several groups: the first that matched
        match = next((g for g in match if g), fallback)
    return match.strip()
