"""Checkers for the book's "build" exercises: call one with your function and read the verdict.

    from minitfm.exercises import check_causal_mask
    check_causal_mask(my_causal_mask)   # prints "✓ check_causal_mask: all 6 cases pass" or what differs

Each checker runs your function on cases it generates (edge cases included), compares the answer with the
library's, and names the first failing case and what differs. It prints its verdict and returns a
:class:`CheckResult` (``.passed``, ``.message``); it never raises on a mistake and never shows the
reference code. A function that raises ``NotImplementedError`` (the notebook's stub) gets
"not implemented yet". Set ``MINITFM_CHECK_LOG=path`` to append every verdict to ``path`` as a JSON line
(an absolute path: a notebook kernel runs in its own folder; ``tools/grade.py`` does this to grade a class).
"""
from minitfm.exercises._architectures import check_gated_delta_step, check_sink_softmax
from minitfm.exercises._core import CheckResult
from minitfm.exercises.attention import check_attention
from minitfm.exercises.bpe import check_apply_merge, check_count_pairs, check_encode_by_rank
from minitfm.exercises.debugging import check_causality_detector, check_first_nonfinite
from minitfm.exercises.evaluation import check_bits_per_byte, check_pass_at_k, check_wilson_interval
from minitfm.exercises.finetuning import check_last_token_index, check_loss_mask, check_lora_forward, check_mean_pooling
from minitfm.exercises.generation import (check_beam_step, check_kv_cache_update, check_repetition_penalty,
                                          check_temperature, check_top_k, check_top_p)
from minitfm.exercises.heads import check_merge_heads, check_split_heads
from minitfm.exercises.masks import check_causal_mask, check_padding_mask
from minitfm.exercises.norms_ffn import check_layer_norm, check_rms_norm, check_swiglu
from minitfm.exercises.positional import check_alibi_slopes, check_rope, check_sinusoidal_encoding
from minitfm.exercises._preferences import check_dpo_loss, check_group_advantages
from minitfm.exercises.pretrained import (check_from_rotate_half, check_sliding_window_mask, check_softcap,
                                          check_split_fused_qkv)
from minitfm.exercises.schedules import check_noam, check_warmup_cosine
from minitfm.exercises.tiled import check_online_softmax, check_tiled_attention
from minitfm.exercises.training import check_label_smoothed_loss, check_shift_right
from minitfm.exercises.vision import check_patchify, check_window_partition

CHECKERS = {name: obj for name, obj in globals().items() if name.startswith("check_")}

__all__ = ["CheckResult", "CHECKERS", *CHECKERS]
