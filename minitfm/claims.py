"""Verdicts on rules of thumb, computed from the reader's own run.

A claim is tested in four beats: the rule is stated *before* the run ("confirmed if every seed's loss
stays above 2.0"), the run repeats the experiment over several seeds, the evidence is shown per seed,
and the verdict is computed from this run's numbers by the stated rule. This module holds the two
pieces every chapter shares: a per-seed table and the verdict from per-seed outcomes, or, where the seeds
disagree, from the 95% interval of a mean over the seeds (``interval_verdict``).

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

__all__ = ["VERDICTS", "interval_verdict", "judge", "seed_table", "t_quantile_975", "verdict", "verdict_problems",
           "verdict_words"]

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


def t_quantile_975(df: int) -> float:
    """Student's t at its 97.5th percentile for ``df`` degrees of freedom: the half-width of a 95% interval of a
    mean over n values is this (with ``df = n - 1``) times the standard error. 12.706 for 1, 4.303 for 2, 2.776
    for 4; it tends to the normal's 1.960 as ``df`` grows.

    Exact, by bisection on the t distribution's closed-form CDF for an integer number of degrees of freedom
    (Abramowitz and Stegun 26.7.3 and 26.7.4); no scipy needed.
    """
    if isinstance(df, bool) or not isinstance(df, int):
        raise TypeError(f"df must be a positive int (the number of values minus 1), got {df!r} ({type(df).__name__})")
    if df < 1:
        raise ValueError(f"df must be at least 1 (an interval needs at least 2 values), got {df}")
    if df > 1000:  # the CDF below sums df/2 terms; at this size t is within 0.002 of the normal's quantile
        z = 1.959963984540054
        return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)

    def central(t: float) -> float:  # P(|T| < t)
        theta = math.atan(t / math.sqrt(df))
        c2, s = math.cos(theta) ** 2, math.sin(theta)
        if df % 2 == 0:  # sin(theta) (1 + 1/2 c^2 + 1*3/(2*4) c^4 + ... up to c^(df-2))
            term = total = 1.0
            for k in range(1, df // 2):
                term *= c2 * (2 * k - 1) / (2 * k)
                total += term
            return s * total
        if df == 1:
            return 2 * theta / math.pi
        term = total = 1.0  # (2/pi) (theta + sin cos (1 + 2/3 c^2 + 2*4/(3*5) c^4 + ... up to c^(df-3)))
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        return 2 / math.pi * (theta + s * math.cos(theta) * total)

    low, high = 0.0, 100.0  # central(100) > 0.99 for df = 1 already
    for _ in range(80):
        mid = (low + high) / 2
        low, high = (mid, high) if central(mid) < 0.95 else (low, mid)
    return (low + high) / 2


def interval_verdict(what: str, values: Sequence[float], above: float, *, fmt: str = "+.2f",
                     unit: str = "seeds") -> str:
    """The verdict on a mean over seeds: is it above the line ``above``, by its 95% confidence interval?

    ``values`` holds one number per seed (say, per seed, a setting's score minus another's: a paired
    difference). The interval is the mean plus or minus Student's t (``t_quantile_975(n - 1)``) times the
    standard error, ``sd / sqrt(n)`` with the sample standard deviation. The word is *confirmed* if the whole
    interval lies above ``above``, *contradicted* if it lies below, *mixed* if it contains ``above``: the rule a
    chapter states before its run when a count of seeds would change its word with the seeds. ``what`` says
    what the values are; ``fmt`` is the format spec of the mean and the interval (``"+.2f"``, ``"+.1%"``);
    ``unit`` names what was repeated. Returns e.g.::

        verdict: confirmed: <what>: mean +1.76, 95% interval +0.64 to +2.88 over 5 seeds (above 0: confirmed;
        below: contradicted; containing it: mixed)
    """
    if not isinstance(what, str) or not what.strip():
        raise TypeError(f"what must be a non-empty string saying what the values are, got {what!r}")
    if not isinstance(unit, str) or not unit.strip():
        raise TypeError(f"unit must be a non-empty string such as 'seeds', got {unit!r}")
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise TypeError(f"values must be a sequence with one number per seed, got {type(values).__name__}")
    def real(v) -> bool:
        return not isinstance(v, (bool, str, bytes)) and (isinstance(v, (int, float)) or hasattr(v, "__float__"))

    bad = [v for v in values if not real(v)]
    if bad:
        raise TypeError(f"values must hold numbers (one per seed), got {bad[0]!r} ({type(bad[0]).__name__})")
    if not real(above):
        raise TypeError(f"above must be a number (the line the mean is judged against), got {above!r}")
    if not isinstance(fmt, str):
        raise TypeError(f"fmt must be a format spec string such as '+.2f', got {fmt!r}")
    numbers, line = [float(v) for v in values], float(above)
    if len(numbers) < 2:
        raise ValueError(f"values has {len(numbers)} number(s): an interval of a mean needs at least 2 seeds")
    if not all(math.isfinite(v) for v in numbers + [line]):
        raise ValueError(f"values and above must be finite (a diverged seed is a verdict of its own), got "
                         f"{numbers} and {line}")
    try:
        format(1.0, fmt)
    except ValueError as err:
        raise ValueError(f"fmt must be a format spec for one number such as '+.2f', got {fmt!r}") from err
    n = len(numbers)
    mean = sum(numbers) / n
    half = t_quantile_975(n - 1) * math.sqrt(sum((v - mean) ** 2 for v in numbers) / (n - 1) / n)
    low, high = mean - half, mean + half
    word = "confirmed" if low > line else "contradicted" if high < line else "mixed"
    return verdict(word, f"{what}: mean {mean:{fmt}}, 95% interval {low:{fmt}} to {high:{fmt}} over {n} {unit} "
                         f"(above {line:g}: confirmed; below: contradicted; containing it: mixed)")


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
