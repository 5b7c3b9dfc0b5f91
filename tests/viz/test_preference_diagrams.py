"""Chapter 16's diagrams: DPO's pairwise objective and one GRPO step, drawn from the formulas they show."""
import math

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from minitfm.preferences.dpo import dpo_loss  # noqa: E402
from minitfm.preferences.grpo import group_advantages  # noqa: E402
from minitfm.viz.finetuning_diagrams import (dpo_diagram, dpo_loss_curve, group_advantages_of,  # noqa: E402
                                             grpo_diagram)


def texts(fig):
    return " ".join(t.get_text() for ax in fig.axes for t in ax.texts)


def test_the_dpo_curve_is_the_librarys_loss_and_ln_2_at_zero():
    d = [-8.0, -1.0, 0.0, 0.5, 3.0, 400.0, -400.0]
    for beta in (0.1, 1.0):
        ours = dpo_loss_curve(d, beta)
        for x, value in zip(d, ours):  # one pair whose policy log-ratios differ by x, the reference at 0
            lib = dpo_loss(torch.tensor([x], dtype=torch.float64), torch.zeros(1, dtype=torch.float64),
                           torch.zeros(1, dtype=torch.float64), torch.zeros(1, dtype=torch.float64), beta=beta).loss
            assert value == pytest.approx(float(lib), rel=1e-9, abs=1e-12)
        assert ours[2] == pytest.approx(math.log(2))
    with pytest.raises(ValueError, match="beta must be > 0"):
        dpo_loss_curve(d, 0.0)


def test_the_dpo_diagram_names_its_parts_and_plots_each_beta():
    fig = dpo_diagram(betas=(0.1, 1.0))
    words = texts(fig)
    for label in ["chosen y_w", "rejected y_l", "log pi_ref(y_w|x)", "margin", "-log sigma(margin)", "ln 2"]:
        assert label in words, label
    inset = fig.axes[1]
    assert [line.get_label() for line in inset.lines if not line.get_label().startswith("_")] == \
        ["beta = 0.1", "beta = 1"]
    plt.close(fig)


def test_the_grpo_diagram_prints_the_librarys_advantages():
    replies, answer = ("85", "85", "75", "86", "85", "8"), "85"
    rewards = [float(r == answer) for r in replies]
    lib = group_advantages(torch.tensor([rewards], dtype=torch.float64))[0].tolist()
    assert group_advantages_of(rewards) == pytest.approx(lib, rel=1e-12)
    fig = grpo_diagram(replies, answer, wrong_group=("84", "86", "75", "8"))
    words = texts(fig).split()
    assert words.count(f"{lib[0]:+.2f}") == 3 and words.count(f"{lib[2]:+.2f}") == 3  # three right, three wrong
    assert words.count("+0") == 4 and "nothing" in words  # the all-wrong group: A = 0 everywhere
    plt.close(fig)
    with pytest.raises(ValueError, match="at least 2 rewards"):
        group_advantages_of([1.0])
