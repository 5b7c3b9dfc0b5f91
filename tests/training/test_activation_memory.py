import pytest
import torch
import torch.nn.functional as F
from torch import nn

from minitfm.config import ModelConfig
from minitfm.models import DecoderOnlyLM
from minitfm.training.activation_memory import OpRecorder, SavedTensorMeter, gradient_checkpointing


def test_meter_counts_a_saved_tensor_once_and_skips_parameters():
    linear = nn.Linear(8, 8, bias=False)
    x = torch.randn(4, 8, requires_grad=True)
    with SavedTensorMeter(exclude=linear.parameters()) as meter:
        y = linear(x) * linear(x)  # x is saved by both linears; the two outputs by the product
    assert meter.bytes == x.nelement() * 4 + 2 * y.nelement() * 4
    with SavedTensorMeter() as everything:
        linear(x)
    assert everything.bytes == (x.nelement() + linear.weight.nelement()) * 4


def test_meter_sees_nothing_without_autograd():
    with torch.no_grad(), SavedTensorMeter() as meter:
        nn.Linear(8, 8)(torch.randn(4, 8)).relu()
    assert meter.bytes == 0


def test_checkpointing_keeps_gradients_and_saves_memory():
    torch.manual_seed(0)
    model = DecoderOnlyLM(ModelConfig.tiny(n_layers=3, dropout=0.1))
    tokens = torch.randint(0, 16, (2, 12))
    results = []
    for checkpointed in (False, True):
        torch.manual_seed(1)  # same dropout masks
        model.zero_grad()
        with SavedTensorMeter(exclude=model.parameters()) as meter:
            if checkpointed:
                with gradient_checkpointing(model.layers):
                    loss = model(tokens).logsumexp(-1).mean()
            else:
                loss = model(tokens).logsumexp(-1).mean()
        loss.backward()  # after the with: the recomputation still works
        results.append((meter.bytes, loss.detach(), [p.grad.clone() for p in model.parameters()]))
    (plain_bytes, plain_loss, plain_grads), (ck_bytes, ck_loss, ck_grads) = results
    torch.testing.assert_close(ck_loss, plain_loss)
    for a, b in zip(ck_grads, plain_grads):
        torch.testing.assert_close(a, b)
    assert ck_bytes < 0.5 * plain_bytes
    assert all("forward" not in vars(block) for block in model.layers)  # patch removed


def test_checkpointing_rejects_non_modules():
    with pytest.raises(TypeError, match="nn.Modules"):
        with gradient_checkpointing([lambda x: x]):
            pass


def test_recorder_sees_autocast_dtypes_and_the_largest_tensor():
    x = torch.randn(2, 3, 16, 8)
    with OpRecorder() as rec:
        F.softmax(x @ x.transpose(-2, -1), dim=-1)
    assert rec.largest().nbytes == 2 * 3 * 16 * 16 * 4  # the scores, (B, H, T, T) floats
    with torch.autocast("cpu", dtype=torch.bfloat16), OpRecorder() as rec:
        nn.Linear(8, 4)(torch.randn(5, 8))
    assert rec.dtypes_by_op()["addmm"] == {"bfloat16"}
    with pytest.raises(ValueError, match="no operation"):
        OpRecorder().largest()


def test_fused_attention_never_creates_the_t_by_t_matrix():
    q = torch.randn(1, 2, 256, 16)
    with OpRecorder() as manual:
        torch.softmax(q @ q.transpose(-2, -1) / 4.0, dim=-1) @ q
    with OpRecorder() as fused:
        F.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert manual.largest().nbytes == 2 * 256 * 256 * 4
    assert fused.largest().nbytes < manual.largest().nbytes / 10  # the output (and one number per query)
