"""Verdicts on rules of thumb, computed from the reader's own run.

A claim is tested in four beats: the rule is stated *before* the run ("confirmed if every seed's loss
stays above 2.0"), the run repeats the experiment over several seeds, the evidence is shown per seed,
and the verdict is computed from this run's numbers by the stated rule. This module holds the two
pieces every chapter shares: a per-seed table and the verdict from per-seed outcomes.

    rule = "every seed's Post-LN-without-warmup loss stays above 2.0"
    print(seed_table({"Post-LN, no warmup": [2.31, 1.99, 2.30]}, seeds=[0, 1, 2]))
    print(judge(rule, [loss > 2.0 for loss in losses]))
    # -> "mixed: the rule held on 2 of 3 seeds (every seed's ...)"

Verdicts use one small vocabulary, ``VERDICTS`` (defined here and in ``book/CONTRIBUTING_CHAPTERS.md``):
``judge`` and ``verdict`` refuse any other word, and ``verdict_problems`` finds a printed verdict line that
uses one (the test suite runs it over every committed notebook output).

Library code never prints: these functions return strings for the notebook to print.
"""
from __future__ import annotations

import math
import re
from typing import Mapping, Sequence

__all__ = ["VERDICTS", "judge", "seed_table", "verdict", "verdict_problems", "verdict_words"]

# The only verdict words the book prints, with what each means. A timing is not a sixth word: it is one of
# these, printed with the qualifier "(a timing, this run)", for a speed that no assert can check because
# another machine (or a busy one) legitimately gives another figure.
VERDICTS: dict[str, str] = {
    "confirmed": "the rule, as stated before the run, held: on every seed (or repeat) of this run, or by the "
                 "decision the cell stated for the seeds together (an interval above the line, a majority)",
    "mixed": "the run cannot settle it: the rule held on some seeds and not on others, or the interval over the "
             "seeds straddles the line",
    "contradicted": "the rule, as stated, failed: on every seed of this run, or by the stated decision over the "
                    "seeds together",
    "refined": "the run supports a narrower or more precise form of the rule than the one people state",
    "not testable here": "the run could not produce the situation the rule is about (say, no run blew up), "
                         "so it says nothing either way",
}
TIMING = "(a timing, this run)"


def _check_word(word: str, argument: str) -> None:
    if word not in VERDICTS:
        raise ValueError(f"{argument} must be one of the verdict words {sorted(VERDICTS)}, got {word!r}")


def judge(rule: str, held: Sequence[bool], *, every: str = "confirmed", some: str = "mixed",
          none: str = "contradicted", unit: str = "seeds") -> str:
    """The verdict of ``rule`` given, for each seed, whether it held.

    ``every`` is the word when the rule held on every seed, ``none`` when it held on none and ``some``
    otherwise (a result that differs between seeds is reported as such, never rounded to a verdict); each
    must be one of ``VERDICTS``. ``unit`` names what was repeated ("seeds", "repeats", "models").
    Returns e.g. ``"confirmed: the rule held on 5 of 5 seeds (<rule>)"``.
    """
    for word, argument in ((every, "every"), (some, "some"), (none, "none")):
        _check_word(word, argument)
    if not isinstance(unit, str) or not unit.strip():
        raise TypeError(f"unit must be a non-empty string such as 'seeds', got {unit!r}")
    if not isinstance(rule, str) or not rule.strip():
        raise TypeError(f"rule must be a non-empty string stating the test, got {rule!r}")
    if isinstance(held, (str, bytes)) or not hasattr(held, "__len__"):
        raise TypeError(f"held must be a sequence of booleans, one per seed, got {type(held).__name__}")
    outcomes = list(held)
    if not outcomes:
        raise ValueError("held is empty: a verdict needs at least one seed")
    # numpy's and torch's one-element booleans count as booleans; numbers do not (1.0 is not a verdict)
    bad = [h for h in outcomes if not isinstance(h, bool) and type(h).__name__ not in ("bool_", "bool")
           and not (hasattr(h, "dtype") and str(h.dtype) in ("bool", "torch.bool"))]
    if bad:
        raise TypeError(f"held must hold booleans (one per seed), got {bad[0]!r} ({type(bad[0]).__name__})")
    count, n = sum(bool(h) for h in outcomes), len(outcomes)
    word = every if count == n else none if count == 0 else some
    return f"{word}: the rule held on {count} of {n} {unit} ({rule})"


def verdict(word: str, evidence: str, *, timing: bool = False) -> str:
    """A verdict line that is not a count of seeds: ``"verdict: refined: <evidence>"``.

    ``word`` is one of ``VERDICTS``; ``evidence`` says what this run measured and by which rule. With
    ``timing=True`` the line reads ``"verdict (a timing, this run): <word>: <evidence>"``: a speed that the
    notebook prints but does not assert, since another machine gives another figure.
    """
    _check_word(word, "word")
    if not isinstance(evidence, str) or not evidence.strip():
        raise TypeError(f"evidence must be a non-empty string saying what was measured, got {evidence!r}")
    return f"verdict {TIMING}: {word}: {evidence}" if timing else f"verdict: {word}: {evidence}"


_HELD = re.compile(r"(?:^|: |\s{2,}|^\d+\.\s+)([a-z][a-z ]*?): the rule held on \d+ of \d+ ")
_VERDICT = re.compile(r"\bverdict\b[^:]*?: ([a-z][a-z ,]*?)(?::|$)")
# Words that earlier editions printed as verdicts; none may come back.
RETIRED = ("not confirmed:", "not seen at this size", "no difference measured", "timing verdict",
           "no blow-up on any seed:", "blow-ups on every seed:", "blow-ups on some seeds:")


def verdict_words(line: str) -> list[str]:
    """The verdict words of one printed line, in order: those ``judge`` wrote (``<word>: the rule held on k of n``,
    after an optional label) and those ``verdict`` wrote (``verdict...: <word>: ...``). Empty for other lines."""
    found = [(m.start(), m.group(1)) for pattern in (_HELD, _VERDICT) for m in pattern.finditer(line)]
    # a label may stand before the word ("0.3 too much: confirmed"); judge's word is the last part
    return [word.split(": ")[-1] for _, word in sorted(found)]


def verdict_problems(text: str) -> list[str]:
    """Every line of ``text`` (a cell's printed output) whose verdict word is not one of ``VERDICTS``.

    A verdict line is one that ``judge`` wrote (``<word>: the rule held on k of n ...``, after an optional
    label) or ``verdict`` wrote (``verdict...: <word>: ...``); a line with a retired word is a problem too.
    """
    problems = []
    for line in text.splitlines():
        if "the rule held on" in line and not _HELD.search(line):
            problems.append(f"a 'the rule held on' line that judge did not write: {line.strip()[:120]}")
        for word in verdict_words(line):
            if word not in VERDICTS:
                problems.append(f"verdict word {word!r} is not one of {sorted(VERDICTS)}: {line.strip()[:120]}")
        problems += [f"retired verdict words {r!r}: {line.strip()[:120]}" for r in RETIRED if r in line]
    return problems


def _check_row(label, values, n_seeds):
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise TypeError(f"results[{label!r}] must be a sequence with one number per seed, got {type(values).__name__}")
    if len(values) != n_seeds:
        raise ValueError(f"results[{label!r}] has {len(values)} values but there are {n_seeds} seeds")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) and not hasattr(v, "__float__"):
            raise TypeError(f"results[{label!r}] must hold numbers, got {v!r} ({type(v).__name__})")


def seed_table(results: Mapping[str, Sequence[float]], seeds: Sequence[int], *, fmt: str = ".3f",
               label: str = "") -> str:
    """A text table: one row per setting, one column per seed, then the mean and the range (min to max).

    ``results`` maps a setting's name to its numbers, one per seed in the order of ``seeds``; ``fmt`` is
    the format spec of every number (``".3f"``, ``".1%"``, ``".2e"``). NaN is shown as ``nan`` and is left
    out of the mean and range, which are ``nan`` when every seed diverged.
    """
    if not isinstance(results, Mapping) or not results:
        raise TypeError(f"results must be a non-empty mapping {{setting: [one number per seed]}}, got {results!r:.60}")
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds is empty: the table needs at least one seed")
    for name, values in results.items():
        _check_row(name, values, len(seeds))
    try:
        format(1.0, fmt)
    except ValueError as err:
        raise ValueError(f"fmt must be a format spec for one number such as '.3f', got {fmt!r}") from err

    def cell(v):
        return "nan" if math.isnan(v) else format(v, fmt)

    rows = []
    for name, values in results.items():
        values = [float(v) for v in values]
        finite = [v for v in values if not math.isnan(v)]
        mean = sum(finite) / len(finite) if finite else math.nan
        spread = f"{cell(min(finite))} to {cell(max(finite))}" if finite else "nan"
        rows.append([str(name)] + [cell(v) for v in values] + [cell(mean), spread])
    header = [label] + [f"seed {s}" for s in seeds] + ["mean", "range"]
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths)))]
    for r in rows:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(line.rstrip() for line in lines)
