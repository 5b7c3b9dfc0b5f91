"""Learning from preferences and from rewards (chapter 16): DPO, GRPO, and the rewards a program computes.

==========================  ==============================================================================
``dpo``                     direct preference optimisation: the reply's log-probability summed over its
                            tokens (chapter 15's loss mask), the loss derived from Bradley-Terry and the
                            KL-regularised objective, the implicit rewards, margins and preference accuracy
``grpo``                    group relative policy optimisation: a group of sampled replies per prompt,
                            group-relative advantages, the clipped ratio, the k3 KL penalty, and the four
                            loss normalisations (``grpo``, ``bnpo``, ``dr_grpo``, ``dapo``)
``rewards``                 verifiable rewards for the assistant's tasks (exact answer, format) and two
                            deliberately sloppy verifiers: the answer anywhere in the reply, which the book's
                            assistant never reaches, and ``integer_or_pass``, which chapter 16 hacks
``training``                the loops and the measurements: seeded GRPO and DPO on a copy of a chat model
                            (which parameters train, per-step curves), counts of correct samples, pairs from
                            the model's own samples, KL to the reference per reply, pass@k from counts
==========================  ==============================================================================

The losses are tested against Hugging Face ``trl`` (its ``DPOTrainer`` and ``GRPOTrainer``) in
``tests/preferences``; the library never imports ``trl``. Every model here is a
:class:`~minitfm.models.DecoderOnlyLM` with a chat template (:mod:`minitfm.finetuning.chat`).
"""
from minitfm import _lazy
from minitfm.preferences.dpo import (DPOOutput, dpo_batch_loss, dpo_loss, preference_pair, response_log_probs,
                                     sequence_log_probs)
from minitfm.preferences.grpo import (LOSS_TYPES, SCALES, GRPOOutput, Groups, completion_log_probs,
                                      group_advantages, grpo_loss, k3_kl, sample_groups)
from minitfm.preferences.rewards import (REWARDS, answer_format, check_reply, contains_answer, exact_answer,
                                         integer_or_pass)
from minitfm.preferences.training import (TRAINABLE, DPOHistory, GRPOHistory, dpo_train, grpo_train,
                                          pass_at_k_counts, policy_kl, sampled_correct, sampled_pairs,
                                          trainable_names)

__all__ = [
    "DPOOutput", "response_log_probs", "sequence_log_probs", "dpo_loss", "dpo_batch_loss", "preference_pair",
    "LOSS_TYPES", "SCALES", "Groups", "group_advantages", "k3_kl", "GRPOOutput", "grpo_loss", "sample_groups",
    "completion_log_probs",
    "REWARDS", "exact_answer", "answer_format", "contains_answer", "integer_or_pass", "check_reply",
    "TRAINABLE", "trainable_names", "GRPOHistory", "grpo_train", "DPOHistory", "dpo_train", "sampled_correct",
    "sampled_pairs", "policy_kl", "pass_at_k_counts",
]


def __getattr__(name):  # a submodule, loaded on first attribute access
    return _lazy.submodule(__name__, __path__, name)


def __dir__():
    return _lazy.names(globals(), __path__)
