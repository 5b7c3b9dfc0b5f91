"""Training a model (chapters 7, 7b, 10 and 12): the loop and everything around it.

==========================  ==============================================================================
``loop``                    ``TrainConfig``, ``train``, ``History``, ``set_seed``, ``lm_train_config``
``optimizers``              Adam (the paper's, L2) or AdamW (decoupled decay on Linear matrices only)
``schedules``               learning-rate schedules: the paper's (Noam) and warmup-then-cosine
``losses``                  cross-entropy with label smoothing
``checkpoint``              ``save_checkpoint`` and ``load_checkpoint``
``debugging``               the checks of chapter 10: gradients, causality, attention entropy
``experiment_log``          one JSON line per run, to compare runs later
``precision``               float16 and bfloat16: range, rounding, loss scaling
``activation_memory``       measuring the activations a step keeps, and checkpointing them
``scale``                   training memory per device: data, tensor and pipeline parallelism, ZeRO (chapter 12)
``distributed``             data-parallel training on processes that average gradients (chapter 12)
==========================  ==============================================================================

``minitfm.training`` re-exports the loop's, optimizers', schedules', loss's and checkpoints' names
(``minitfm.training.train``).
"""
from minitfm import _lazy
from minitfm.training.checkpoint import load_checkpoint, save_checkpoint
from minitfm.training.loop import History, TrainConfig, forward_batch, lm_train_config, set_seed, train
from minitfm.training.optimizers import OPTIMIZERS, build_optimizer, param_groups
from minitfm.training.losses import label_smoothed_cross_entropy
from minitfm.training.schedules import SCHEDULES, buggy_noam_lr, noam_lr, warmup_cosine_lr


def __getattr__(name):  # a submodule, loaded on first attribute access
    return _lazy.submodule(__name__, __path__, name)


def __dir__():
    return _lazy.names(globals(), __path__)
