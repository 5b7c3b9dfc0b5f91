"""The input checks that a model's forward turns off for its own layers stay on for every other thread."""
import threading

import pytest
import torch

from minitfm import DecoderOnlyLM, ModelConfig
from minitfm._checks import inputs_trusted, trusted_inputs


def test_a_forward_in_one_thread_leaves_the_checks_of_another_thread_on():
    """Review 2026-12b L3: the trust was a process-global counter, so a forward running in one thread (a web
    demo serving two readers) switched off the checks of a direct layer call in another."""
    torch.manual_seed(0)
    model = DecoderOnlyLM(ModelConfig.tiny()).eval()
    inside, release, seen = threading.Event(), threading.Event(), []

    def hold(module, args):  # runs inside the model's forward, where its own layers are trusted
        seen.append(inputs_trusted())
        inside.set()
        release.wait(10)

    handle = model.layers[0].self_attn.register_forward_pre_hook(hold)
    worker = threading.Thread(target=lambda: model(torch.tensor([[1, 2, 3]])))
    worker.start()
    try:
        assert inside.wait(10)
        assert seen == [True] and not inputs_trusted()  # trusted in the worker, not here
        with pytest.raises(ValueError, match=r"x must have shape \(B, T, D=16\)"):
            model.layers[1].self_attn(torch.randn(1, 3, 5))  # checked here while the worker is inside
    finally:
        release.set()
        worker.join(10)
        handle.remove()
    with trusted_inputs():
        with trusted_inputs():
            assert inputs_trusted()
        assert inputs_trusted()
    assert not inputs_trusted()
