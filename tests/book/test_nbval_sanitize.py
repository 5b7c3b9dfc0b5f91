"""The rules nbval applies to every compared output (tests/nbval_sanitize.cfg) normalise what changes between
machines, and only that.

The rules are read and applied by nbval's own code (``get_sanitize_patterns``, then ``IPyNbCell.sanitize``: each
regex in the file's order, ``re.sub`` on the whole output text), so these tests see what a notebook run sees.
The case that made this file: a per-seed difference printed as ``+0.3`` on one machine and ``-0.3`` on another
failed a clean clone's run (issue 45), because the sign was outside the number rule.
"""
from __future__ import annotations

import re
import tomllib
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from nbval.plugin import IPyNbCell, get_sanitize_patterns

ROOT = Path(__file__).resolve().parents[2]
CFG = ROOT / "tests" / "nbval_sanitize.cfg"


def sanitizer():
    """nbval's sanitize, with the patterns it reads from CFG (an OrderedDict, filled as nbval fills it)."""
    patterns = OrderedDict()
    patterns.update(get_sanitize_patterns(CFG.read_text(encoding="utf-8")))
    fake_cell = SimpleNamespace(parent=SimpleNamespace(sanitize_patterns=patterns))
    return lambda text: IPyNbCell.sanitize(fake_cell, text)


sanitize = sanitizer()


def test_nbval_reads_this_file():
    """pytest's options hand nbval this cfg, so the tests below test what a notebook run uses."""
    addopts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert "--nbval-sanitize-with tests/nbval_sanitize.cfg" in addopts["addopts"]
    assert len(get_sanitize_patterns(CFG.read_text(encoding="utf-8"))) >= 8  # every section was parsed


@pytest.mark.parametrize("variants", [
    ["0.3", "+0.3", "-0.3", "\u22120.3"],  # U+2212, the typographic minus
    ["gap +0.3 nats", "gap -0.3 nats", "gap 0.3 nats", "gap 12.25 nats"],
    ["+2.0%", "-2.0%", "2.0%", "+10.5%"],
    ["(acc_norm: +0.00 more)", "(acc_norm: -0.02 more)"],  # chapter 14's cell that failed on a clean clone
    ["x=1e-06", "x=-1e+06", "x=+2E-3", "x=3.5e-07"],
    # a right-aligned column pads a number without a minus sign: at the start of a line, and inside a row
    [" 0.30 |", "-0.30 |", "10.30 |", "-10.30 |"],
    ["a  0.30  0.31", "a -0.30 -0.31", "a 10.30 -0.31"],
    ["ran for 0.3 s", "ran for -0.3 s", "ran for +12 ms"],
])
def test_a_number_normalises_alike_whatever_its_sign_and_padding(variants):
    assert len({sanitize(v) for v in variants}) == 1, [sanitize(v) for v in variants]


@pytest.mark.parametrize("variants", [
    # chapter 7b's majority-of-3 verdict: the word is the same, the count moves with the machine's floats
    ["warmup prevents a stall: verdict: confirmed: held on 2 of 3 seeds (1 layer at 2x lr)",
     "warmup prevents a stall: verdict: confirmed: held on 3 of 3 seeds (1 layer at 2x lr)"],
    ["mixed: the rule held on 1 of 5 seeds (x)", "mixed: the rule held on 4 of 5 seeds (x)"],
])
def test_a_verdicts_count_of_seeds_normalises_alike(variants):
    assert len({sanitize(v) for v in variants}) == 1, [sanitize(v) for v in variants]


@pytest.mark.parametrize("a, b", [
    # the word and the number of seeds are still compared
    ("verdict: confirmed: held on 2 of 3 seeds (r)", "verdict: mixed: held on 2 of 3 seeds (r)"),
    ("confirmed: the rule held on 3 of 3 seeds (r)", "confirmed: the rule held on 5 of 5 seeds (r)"),
])
def test_a_verdicts_word_and_number_of_seeds_are_still_compared(a, b):
    assert sanitize(a) != sanitize(b)


def test_chapter_7s_seed_table_normalises_alike_when_its_signs_flip():
    """Chapter 7's "cost of 0.3" row (issue 45): per-seed differences near 0 change sign between machines."""
    header = "                              seed 0  seed 1  seed 2   mean           range\n"
    here = header + "cost of 0.3 (0.1 minus 0.3)    +1.0%   +0.0%   +2.8%  +1.3%  +0.0% to +2.8%\n"
    there = header + "cost of 0.3 (0.1 minus 0.3)    -1.4%   -0.0%  +12.8%  +3.8%  -1.4% to +12.8%\n"
    assert sanitize(here) == sanitize(there)


@pytest.mark.parametrize("variants", [
    # the page's readout: quotes and < > & as HTML entities (the gallery's first map names '<eos>')
    ["strongest: &#x27;&lt;eos&gt;&#x27; → &#x27;id 5&#x27; 0.37 · mean row entropy 1.54 nats</div>",
     "strongest: &#x27;id 7&#x27; → &#x27;id 8&#x27; 0.36 · mean row entropy 1.54 nats</div>",
     "strongest: &#x27;A&#x27; → &#x27;&lt;bos&gt;&#x27; 0.4 · mean row entropy 1.5 nats</div>"],
    # the data block: JSON's escapes
    ["\"strongest: '\\u003ceos\\u003e' \\u2192 'id 5' 0.37 \\u00b7 mean row entropy 1.54 nats\"",
     "\"strongest: 'id 7' \\u2192 'id 8' 0.37 \\u00b7 mean row entropy 1.54 nats\""],
])
def test_an_attention_explorers_strongest_pair_normalises_alike(variants):
    """The strongest query-key pair of a map is an argmax: near-equal weights pick another pair on another CPU."""
    assert len({sanitize(v) for v in variants}) == 1, [sanitize(v) for v in variants]


@pytest.mark.parametrize("a, b", [
    ("+3 tokens", "-3 tokens"),  # an integer keeps its sign
    ("3 of 20 seeds", "4 of 20 seeds"),  # counts are compared
    ("verdict: confirmed: gap 0.3", "verdict: mixed: gap 0.3"),  # verdict words are compared
    ("token 'the' wins", "token 'a' wins"),  # words are compared
    ("shape (2, 8, 16)", "shape (2, 8, 32)"),
    ("mean 0.3, then loss", "mean 0.3, then lost"),
])
def test_what_is_compared_still_differs(a, b):
    assert sanitize(a) != sanitize(b)


def test_the_rules_apply_in_order():
    """Versions and durations are named before the number rule could eat them, and column padding is last."""
    assert sanitize("torch 2.5.1+cpu") == "torch TORCH-VERSION"
    assert sanitize("took 1.25 s") == "took DURATION"
    assert sanitize("a    b") == "a b"


def _flip_signs(text: str) -> str:
    """Every decimal number of `text` with its sign flipped: 0.3 -> -0.3, -0.3 -> 0.3, +0.3 -> -0.3."""
    # a float on its own: not inside a version (2.5.1) or a name (Llama-3.2-1B), not the 1.1 of a range 0.9-1.1
    number = r"(?<![\w.+\-])([-+]?)(\d+\.\d+(?:[eE][-+]?\d+)?)(?![\w.])"
    return re.sub(number, lambda m: ("" if m.group(1) == "-" else "-") + m.group(2), text)


def _compared_texts(path: Path):
    """The texts nbval compares in a notebook's outputs: streams and every data type but images."""
    for cell in nbformat.read(path, as_version=4).cells:
        for output in cell.get("outputs", []):
            if "text" in output:
                yield output["text"]
            for kind, value in output.get("data", {}).items():
                if isinstance(value, str) and not kind.startswith("image/"):
                    yield value


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_every_committed_output_normalises_alike_with_its_signs_flipped(path):
    """What another machine prints, in the sign at least: flipping every float's sign changes nothing compared."""
    flipped = [text for text in _compared_texts(path) if sanitize(_flip_signs(text)) != sanitize(text)]
    assert not flipped, flipped[0][:500]
