"""Measuring a language model: the numbers an evaluation reports, and how sure they are.

One concept per module, each checked in ``tests/evaluation`` against a trusted reference (lm-eval's definitions,
Chen et al.'s estimator, ``scipy.stats``):

===========================  ==================================================================================
Module                       What it measures
===========================  ==================================================================================
``perplexity``               bits per byte (loss per UTF-8 byte, comparable across tokenizers) beside per-token
                             perplexity (``model_bits_per_byte``)
``multiple_choice``          log-likelihood scoring of choices: sum, per token, per character, per byte (lm-eval
                             ``acc``, ``acc_norm``, ``acc_bytes``)
``prompt_formats``           one item asked two ways: the cloze form against lettered choices (lm-eval's MMLU
                             template)
``generative``               generated answers: exact match, and Chen et al.'s unbiased pass@k
``extraction``               pulling the answer out of a generation: lm-eval's regex filter, strict-match and
                             flexible-extract
``intervals``                Wilson interval for an accuracy, bootstrap interval (percentile, BCa) for anything
``paired``                   two models on the same items: paired bootstrap, McNemar's exact and chi-square tests
``two_proportions``          two accuracies on different items: the two-proportion z-test
``clustered``                the error bar of a mean when items share a passage (clustered standard errors)
``sample_size``              items needed to detect a difference (independent or paired)
``contamination``            word n-gram overlap between training text and test items (13-word grams by
                             default, as in GPT-3's training-set filter)
===========================  ==================================================================================

Only the standard library, numpy and torch are imported (no scipy), so ``import minitfm.evaluation`` stays light.
Every function that draws random numbers takes ``rng`` (a ``numpy.random.Generator`` or an int seed) and has no
default, so each result can be repeated.
"""
from minitfm.evaluation.clustered import ClusteredError, clustered_standard_error
from minitfm.evaluation.contamination import Overlap, ngram_overlap, normalized_words, word_ngrams
from minitfm.evaluation.extraction import FLEXIBLE_EXTRACT, STRICT_MATCH, regex_extract
from minitfm.evaluation.generative import exact_match, mean_pass_at_k, naive_pass_at_k, pass_at_k
from minitfm.evaluation.intervals import bootstrap_distribution, bootstrap_interval, wilson_interval
from minitfm.evaluation.multiple_choice import (ChoiceScores, choice_scores, continuation_log_probs, multiple_choice_metrics,
                                                score_choices)
from minitfm.evaluation.paired import McNemar, PairedBootstrap, discordant_counts, mcnemar_chi2, mcnemar_exact, paired_bootstrap
from minitfm.evaluation.perplexity import BitsPerByte, bits_per_byte, model_bits_per_byte, next_token_log_probs, utf8_length
from minitfm.evaluation.prompt_formats import LETTERS, lettered_prompt, score_lettered
from minitfm.evaluation.sample_size import items_for_paired, items_for_two_proportions
from minitfm.evaluation.two_proportions import TwoProportions, two_proportion_test

__all__ = [
    "BitsPerByte", "bits_per_byte", "model_bits_per_byte", "next_token_log_probs", "utf8_length",
    "ChoiceScores", "choice_scores", "continuation_log_probs", "multiple_choice_metrics", "score_choices",
    "exact_match", "pass_at_k", "mean_pass_at_k", "naive_pass_at_k",
    "wilson_interval", "bootstrap_distribution", "bootstrap_interval",
    "PairedBootstrap", "paired_bootstrap", "McNemar", "discordant_counts", "mcnemar_exact", "mcnemar_chi2",
    "items_for_two_proportions", "items_for_paired",
    "Overlap", "ngram_overlap", "normalized_words", "word_ngrams",
    "LETTERS", "lettered_prompt", "score_lettered",
    "STRICT_MATCH", "FLEXIBLE_EXTRACT", "regex_extract",
    "ClusteredError", "clustered_standard_error", "TwoProportions", "two_proportion_test",
]
