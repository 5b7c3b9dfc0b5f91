"""Every public path works with a model on a device other than the CPU, checked on a machine without a GPU.

Run by ``tests/test_any_device.py`` in a process of its own (see ``DEVICE`` below); ``pytest
tests/any_device_checks.py -p no:xdist`` runs it directly.

How: a *labelled* device. ``OnDevice`` is a tensor subclass that holds an ordinary CPU tensor and reports the
device ``otherdevice:0``; ``OtherDevice`` is a ``TorchDispatchMode`` that sees every ATen operation, runs it on
the CPU tensors inside and labels what comes out. It raises ``DeviceMix`` where a GPU raises: when an operation
meets a labelled tensor and an unlabelled (CPU) tensor of one or more dimensions, or a CPU random generator for
labelled tensors. So a library function that builds ids, masks or positions with ``torch.tensor(...)`` or
``torch.arange(...)`` and no ``device=`` fails here as it fails on a GPU, while the whole real computation runs:
values, ``.item()``, the token-range checks, sampling, backward and the optimiser. Each path is then compared
with the same call on the CPU.

What a GPU allows is allowed here too, so a pass here is no stricter than a GPU:
- a 0-dimensional CPU tensor with device tensors (PyTorch treats it as a scalar; Adam's step counter is one);
- indexing a device tensor with CPU indices (``x[cpu_ids]``, ``x[cpu_ids] = v``), which PyTorch moves;
- copies between devices (``.to(device)``, ``.cpu()``, ``copy_``), ``.item()`` and ``.tolist()``.

The label is not "cuda", because a CPU build of PyTorch asks for CUDA itself before an operation reaches a
mode: indexing a tensor labelled ``cuda:0`` (``valid[:, -1]`` in ``generate``) and ``.to("cuda")`` open a CUDA
device guard ("PyTorch is not linked with support for cuda devices"). It is PyTorch's spare backend slot,
``privateuseone``, renamed and registered from Python with a guard that needs no hardware
(``torch.utils.backend_registration``); autograd's engine then runs backward for it too, provided the
registration comes before the process's first backward. ``meta`` does not do: ``torch.tensor(data,
device="meta")`` makes a real meta tensor without reaching the mode.

The alternatives, tried first:
- ``FakeTensorMode`` accepts a fake ``cuda`` device and raises on a mix, but its tensors hold no values: it stops
  at ``.item()`` and at every check of a value (a token id out of range), and generation reads values at every
  step; indexing a fake CUDA tensor asks a CPU build for a CUDA guard;
- the ``meta`` device stops at ``.item()`` for the same reason;
- a ``__torch_function__`` subclass alone misses the ATen calls made inside composite operations (and inside
  backward), and factory functions asked for another device would still need that device; a dispatch mode
  sees both.

Limits: ``torch.Generator(device=...)`` cannot be made for the labelled device, so a library function must not
make one for the model's device (``generate`` draws with a CPU generator on the CPU, which a GPU run may do too);
a device-type test such as ``device.type == "cuda"`` is not exercised (the library has none on these paths);
attention takes a different CPU kernel for another device type, so floats are compared within 1e-5.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

_ACTIVE: list = []  # the OtherDevice modes entered and not left


def _a_device_without_hardware() -> torch.device:
    """PyTorch's spare backend slot, ``privateuseone``, registered from Python with a device guard that needs no
    hardware (torch.utils.backend_registration). It reports itself available only inside :class:`OtherDevice`,
    so an ``is_available()`` check outside a check sees the CPU alone."""
    if torch._C._get_privateuse1_backend_name() == "privateuseone":  # once per process
        from torch.utils.backend_registration import (_DummyBackendModule, _DummyPrivateUse1Hook,
                                                      _setup_privateuseone_for_python_backend)

        class Hook(_DummyPrivateUse1Hook):
            def is_available(self) -> bool:
                return bool(_ACTIVE)

        class Module(_DummyBackendModule):
            def is_available(self) -> bool:
                return bool(_ACTIVE)

        _setup_privateuseone_for_python_backend(rename=DEVICE_NAME, backend_module=Module(), hook=Hook())
    return torch.device(DEVICE_NAME, 0)


DEVICE_NAME = "otherdevice"
# Registered at import, before any backward pass: autograd's engine sizes its per-device queues once, at the
# first backward of the process. The registration lasts as long as the process, which is why this file runs in
# a process of its own (``tests/test_any_device.py`` starts it) and is not collected with the other tests.
DEVICE = _a_device_without_hardware()
aten = torch.ops.aten

# operations that a GPU accepts with CPU tensors among device tensors (index_put: CPU indices, not CPU values)
_INDEX_PUT = {aten.index_put_.default, aten.index_put.default, aten._index_put_impl_.default}
_CROSS_DEVICE_OK = {aten.copy_.default, aten._to_copy.default, aten.index.Tensor, aten.lift_fresh.default}


class DeviceMix(RuntimeError):
    """A CPU tensor met a tensor on the model's device: the error a GPU run would raise."""


class OnDevice(torch.Tensor):
    """A CPU tensor labelled as living on ``DEVICE``."""

    @staticmethod
    def __new__(cls, inner: torch.Tensor):
        return torch.Tensor._make_wrapper_subclass(
            cls, inner.shape, strides=inner.stride(), storage_offset=inner.storage_offset(), dtype=inner.dtype,
            layout=inner.layout, device=DEVICE, requires_grad=inner.requires_grad)

    def __init__(self, inner: torch.Tensor):
        self.inner = inner

    @staticmethod
    def wrap(inner: torch.Tensor) -> "OnDevice":
        # A lazy conjugate or negative view (x.conj() of a complex tensor, made by RoPE's backward) is resolved:
        # the wrapper cannot carry the bit, and an op that reads it from the wrapper would skip it.
        return OnDevice(inner.resolve_conj().resolve_neg())

    def __repr__(self):
        return f"OnDevice({self.inner!r})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise AssertionError(f"{func} ran on a labelled tensor outside OtherDevice")  # the mode handles every op

    def tolist(self):  # torch refuses .tolist() on a subclass; on CUDA it copies to the CPU
        return self.inner.tolist()


_DEVICE_IN_ARGS = {aten.to.device: 1, aten.to.prim_Device: 1}  # ops that take the device as a positional argument


def _device_asked(func, args, kwargs):
    """The device an operation is asked to put its result on, or None."""
    if func in _DEVICE_IN_ARGS and len(args) > _DEVICE_IN_ARGS[func]:
        return args[_DEVICE_IN_ARGS[func]]
    return kwargs.get("device")


class OtherDevice(TorchDispatchMode):
    """Run every operation on the CPU, keep the device labels, and raise :class:`DeviceMix` on a mix."""

    def __init__(self):
        super().__init__()
        self.ops = 0

    def __enter__(self):
        _ACTIVE.append(self)
        self._lift = torch._C._only_lift_cpu_tensors()
        torch._C._set_only_lift_cpu_tensors(True)  # torch.tensor(data, device=...) then reaches the mode
        return super().__enter__()

    def __exit__(self, *exc):
        torch._C._set_only_lift_cpu_tensors(self._lift)
        _ACTIVE.pop()
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        self.ops += 1
        flat, _ = tree_flatten((args, kwargs))
        labelled = [t for t in flat if isinstance(t, OnDevice)]
        plain = [t for t in flat if isinstance(t, torch.Tensor) and not isinstance(t, OnDevice) and t.dim() > 0]
        if func in _INDEX_PUT:  # CPU indices are fine, CPU values of > 0 dimensions are not
            values = args[2] if len(args) > 2 else kwargs.get("values")
            plain = [values] if isinstance(values, torch.Tensor) and not isinstance(values, OnDevice) \
                and values.dim() > 0 else []
        if labelled and plain and func not in _CROSS_DEVICE_OK:
            raise DeviceMix(f"{func}: a CPU tensor of shape {tuple(plain[0].shape)} met tensors on {DEVICE} "
                            f"(shapes {[tuple(t.shape) for t in labelled][:3]})")
        generator = kwargs.get("generator")
        if labelled and generator is not None and generator.device.type != DEVICE.type:
            raise DeviceMix(f"{func}: a {generator.device} generator for tensors on {DEVICE}")
        asked = _device_asked(func, args, kwargs)
        target = None if asked is None else torch.device(asked).type == DEVICE.type  # to the device, or off it
        if asked is not None:  # run on the CPU
            if func in _DEVICE_IN_ARGS:
                args = tuple(torch.device("cpu") if i == _DEVICE_IN_ARGS[func] else a for i, a in enumerate(args))
            else:
                kwargs["device"] = torch.device("cpu")
        inner_of = {}

        def unwrap(x):
            if isinstance(x, OnDevice):
                inner_of[id(x.inner)] = x
                return x.inner
            return x

        out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs))
        label = target if target is not None else bool(labelled)
        if func is aten.copy_.default:  # the destination keeps its device
            return args[0]

        def wrap(x):
            if not isinstance(x, torch.Tensor):
                return x
            if id(x) in inner_of and target is not False:  # an in-place op, or .to() returning its input
                return inner_of[id(x)]
            return OnDevice.wrap(x) if label else x

        with torch.inference_mode(False):  # a wrapper made under inference_mode could not be viewed
            return tree_map(wrap, out)


def to_device(module: torch.nn.Module) -> torch.nn.Module:
    """``module.to(device)`` for the labelled device: every parameter and buffer becomes a labelled tensor, and a
    tensor that two modules share (tied embeddings) stays one tensor, as ``Module.to`` keeps it on a GPU.
    (``Module.to`` itself would replace a shared parameter once per module for a tensor subclass, untying it.)"""
    moved: dict[int, torch.Tensor] = {}
    for sub in module.modules():
        for table in (sub._parameters, sub._buffers):
            for name, t in table.items():
                if t is not None and id(t) not in moved:
                    inner = OnDevice.wrap(t.detach().clone())
                    moved[id(t)] = torch.nn.Parameter(inner, t.requires_grad) if table is sub._parameters else inner
                if t is not None:
                    table[name] = moved[id(t)]
    return module


# ---- the checker itself: it raises on what a GPU refuses, and only on that -----------------------------------------
def test_the_fake_device_raises_on_a_cpu_tensor_mixed_in_and_allows_what_cuda_allows():
    with OtherDevice():
        x = torch.arange(6.0, device=DEVICE).reshape(2, 3)
        assert x.device == DEVICE and isinstance(x, OnDevice)
        with pytest.raises(DeviceMix, match=r"CPU tensor of shape \(3,\)"):
            x + torch.ones(3)  # what a library function that forgot device= does
        with pytest.raises(DeviceMix, match="aten.embedding"):  # ids built without device= meet the weights
            torch.nn.functional.embedding(torch.tensor([[1, 2]]), torch.ones(4, 3, device=DEVICE))
        with pytest.raises(DeviceMix, match="generator"):
            torch.multinomial(x.softmax(-1), 1, generator=torch.Generator().manual_seed(0))
        assert (x * torch.tensor(2.0)).sum().item() == 30.0  # a 0-dim CPU tensor is a scalar on CUDA too
        assert x[torch.tensor([1])].tolist() == [[3.0, 4.0, 5.0]]  # CPU indices are moved by CUDA too
        x[torch.tensor([0])] = torch.tensor(7.0)  # and a 0-dim value
        assert x[0].tolist() == [7.0, 7.0, 7.0]
        with pytest.raises(DeviceMix, match="index_put_"):
            x[torch.tensor([0])] = torch.ones(1, 3)  # but not CPU values
        assert torch.tensor([1, 2], device=DEVICE).device == DEVICE
        assert x.cpu().device.type == "cpu" and x.to(DEVICE).device == DEVICE


# ---- the library's public paths, each on the labelled device against the same call on the CPU ---------------------
import copy  # noqa: E402

import minitfm as m  # noqa: E402
from minitfm import evaluation as E  # noqa: E402
from minitfm.finetuning import (ChatTemplate, DecoderClassifier, add_lora, collate_classification, completions,  # noqa: E402
                                merge_and_unload, replies, reply, score, statement_recall, supervised_finetune)
from minitfm.finetuning.answering import sampled_replies  # noqa: E402
from minitfm.finetuning.new_tokens import train_token_rows  # noqa: E402
from minitfm.finetuning import tasks as T  # noqa: E402
from minitfm.generation import beam_search  # noqa: E402
from minitfm.lm import prose  # noqa: E402
from minitfm.lm.base_lm import base_lm_config  # noqa: E402
from minitfm.lm.prose import byte_tokenizer  # noqa: E402
from minitfm.preferences.grpo import sample_groups  # noqa: E402
from minitfm.training import TrainConfig  # noqa: E402

TOKENIZER = byte_tokenizer()
TEMPLATE = ChatTemplate(TOKENIZER, bos_id=256)
QUESTIONS = [[{"role": "user", "content": "What is 1 + 1?"}], [{"role": "user", "content": "Expand KV."}]]


def byte_lm(**overrides):
    torch.manual_seed(0)
    return m.DecoderOnlyLM(base_lm_config(**{**dict(d_model=32, n_layers=2, d_ff=64, max_seq_len=64),
                                              **overrides})).eval()


def on_both(call, model):
    """``call(model)`` on the CPU, then on a copy of ``model`` on the labelled device: both results."""
    torch.manual_seed(1)  # for what a call initialises (a classifier's head)
    expected = call(copy.deepcopy(model))
    torch.manual_seed(1)
    with OtherDevice() as mode:
        got = call(to_device(copy.deepcopy(model)))
    assert mode.ops > 0
    return expected, got


def as_cpu(x):
    return tree_map(lambda t: t.inner if isinstance(t, OnDevice) else t, x)


def same(a, b):
    """Equal, floats within 1e-5: the labelled device runs the CPU's kernels, but attention may take another of
    them (PyTorch picks by device type), which sums in another order."""
    a, b = as_cpu(a), as_cpu(b)
    if isinstance(a, torch.Tensor):
        return torch.allclose(a.double(), b.double(), atol=1e-5, rtol=1e-5) if a.is_floating_point() else torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and np.allclose(a, b, atol=1e-5, rtol=1e-5)
    if isinstance(a, float):
        return abs(a - b) <= 1e-5 * max(1.0, abs(a))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if hasattr(a, "__dataclass_fields__"):
        return all(same(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)
    return a == b


PROMPT = [[256, 72, 105], [256, 65, 66]]


def moved(ids):
    """A prompt on the model's device, as a caller passes it."""
    t = torch.tensor(ids)
    return t.to(DEVICE) if _ACTIVE else t


GENERATION = {
    "generate greedy": lambda lm: m.generate(lm, moved(PROMPT), 5).tokens,
    "generate sampled": lambda lm: m.generate(lm, moved(PROMPT), 5, do_sample=True,
                                              generator=torch.Generator().manual_seed(0)).tokens,
    "generate no cache": lambda lm: m.generate(lm, moved(PROMPT), 3, use_cache=False).tokens,
    "generate grouped": lambda lm: m.generate(lm, moved(PROMPT), 4, do_sample=True, num_return_sequences=2,
                                              generator=torch.Generator().manual_seed(0)).tokens,
    "beam_search": lambda lm: beam_search(lm, moved(PROMPT), 4, num_beams=2).tokens,
    "greedy_decode": lambda lm: m.greedy_decode(lm, moved(PROMPT), 4),
}
CHAT = {
    "replies": lambda lm: replies(lm, TEMPLATE, QUESTIONS, max_new_tokens=4, return_finished=True),
    "reply greedy": lambda lm: reply(lm, TEMPLATE, QUESTIONS[0], max_new_tokens=4),
    "reply sampled": lambda lm: reply(lm, TEMPLATE, QUESTIONS[0], max_new_tokens=4, temperature=1.0, seed=3),
    "score": lambda lm: score(lm, TEMPLATE, [T.Example("add", 0, "What is 1 + 1?", "2", "train")], max_new_tokens=4),
    "completions": lambda lm: completions(lm, TOKENIZER, ["1 + 1 = ", "a"], 3, bos_id=256),
    "statement_recall": lambda lm: statement_recall(lm, TOKENIZER, "add", [dict(a=1, b=1, answer="2")], bos_id=256),
    "sampled_replies": lambda lm: sampled_replies(lm, TEMPLATE, QUESTIONS, 3, max_new_tokens=4, seed=3),
    "sample_groups": lambda lm: sample_groups(lm, TEMPLATE, QUESTIONS, 3, max_new_tokens=4, seed=3).completion,
}
SCORERS = {
    "next_token_log_probs": lambda lm: E.next_token_log_probs(lm, [256, 72, 105, 33]),
    "next_token_log_probs (strided)": lambda lm: E.next_token_log_probs(lm, list(range(80)), stride=16),
    "next_token_log_probs (tensor)": lambda lm: E.next_token_log_probs(lm, moved([256, 72, 105, 33])),
    "model_bits_per_byte": lambda lm: E.model_bits_per_byte(lm, TOKENIZER, "Attention is all.", bos_id=256),
    "model_bits_per_byte (no bos)": lambda lm: E.model_bits_per_byte(lm, TOKENIZER, "Attention is all."),
    "continuation_log_probs": lambda lm: E.continuation_log_probs(lm, TOKENIZER, "The cat", " sat"),
    "score_choices": lambda lm: E.score_choices(lm, TOKENIZER, "2 + 2 =", ["4", "5"]),
    "score_lettered": lambda lm: E.score_lettered(lm, TOKENIZER, "2 + 2 =", ["4", "5"]),
    "text_nats": lambda lm: prose.text_nats(lm, ["Attention.", "A key and a value."]),
    "bits_per_byte_of": lambda lm: prose.bits_per_byte_of(lm, ["Attention.", "A key and a value."]),
    "heldout_bits_per_byte": lambda lm: prose.heldout_bits_per_byte(lm, 2),
}


@pytest.mark.parametrize("name", list(GENERATION) + list(CHAT) + list(SCORERS))
def test_a_model_on_another_device_gives_the_cpu_result(name):
    call = {**GENERATION, **CHAT, **SCORERS}[name]
    expected, got = on_both(call, byte_lm())
    assert same(expected, got), f"{name}: {expected!r} on the CPU, {got!r} on the device"


def test_every_evaluation_function_that_takes_a_model_is_checked_here():
    """A new scorer in ``minitfm.evaluation`` must join SCORERS: "every scorer" stays true."""
    import inspect
    takes_model = {n for n in E.__all__ if callable(getattr(E, n)) and not inspect.isclass(getattr(E, n))
                   and "model" in inspect.signature(getattr(E, n)).parameters}
    covered = {name.split(" ")[0] for name in SCORERS}
    assert takes_model <= covered, f"not checked on another device: {sorted(takes_model - covered)}"


def _train_steps(model):
    batch = m.Batch(None, moved([[256, 72, 105, 33]] * 2), moved([[72, 105, 33, 256]] * 2), 0)
    history = m.train(model, [batch] * 3, TrainConfig(steps=3, batch_size=2, lr=1e-2, warmup=1, seed=0),
                      progress=False)
    return history.loss, [p.detach() for p in model.parameters()]


def test_train_updates_a_model_on_another_device_as_on_the_cpu():
    expected, got = on_both(_train_steps, byte_lm())
    assert same(expected[0], got[0]) and same(expected[1], got[1])
    assert all(isinstance(p, OnDevice) for p in got[1])


def test_supervised_finetune_on_another_device():
    chats = [TEMPLATE.render(q + [{"role": "assistant", "content": "2"}]) for q in QUESTIONS]
    run = lambda lm: supervised_finetune(lm, chats, TrainConfig(steps=2, batch_size=2, lr=1e-2, warmup=1, seed=0),
                                         progress=False).loss  # noqa: E731
    expected, got = on_both(run, byte_lm())
    assert same(expected, got)


def _lora(model):
    add_lora(model, targets=("q_proj", "v_proj"), r=2, seed=0)
    loss, _ = _train_steps(model)
    merged = merge_and_unload(model)
    return loss, m.generate(merged.eval(), moved(PROMPT), 3).tokens


def test_lora_seeded_trained_and_merged_on_another_device():
    expected, got = on_both(_lora, byte_lm())
    assert same(expected, got)


def _token_rows(model):
    before = model.tok_emb.weight.detach().clone()
    train_token_rows(add_lora(model, targets=("q_proj", "v_proj"), r=2, seed=0), [256, 72])
    loss, _ = _train_steps(model)
    moved_rows = (as_cpu(model.tok_emb.weight.detach()) != as_cpu(before)).any(dim=1).nonzero().flatten().tolist()
    return loss, moved_rows, model.tok_emb.weight.detach()


def test_lora_with_trained_token_rows_on_another_device():
    # the hook's mask of rows is made on the weight's device: only rows 256 and 72 move, as on the CPU
    expected, got = on_both(_token_rows, byte_lm())
    assert same(expected, got)
    assert as_cpu(got[1]) == [72, 256]


def _classify(backbone):
    classifier = DecoderClassifier(backbone, 3, pad_id=0)
    rows = [torch.tensor([256, 72, 105]), torch.tensor([256, 65])]
    batch = collate_classification(rows, [0, 2], pad_id=0)
    if _ACTIVE:
        batch = batch.to(DEVICE)
    history = m.train(classifier, [batch] * 2, TrainConfig(steps=2, batch_size=2, lr=1e-2, warmup=1, seed=0),
                      progress=False)
    return history.loss, classifier.eval()(batch.tgt_in)


def test_the_classifier_trains_and_predicts_on_another_device():
    expected, got = on_both(_classify, byte_lm())
    assert same(expected, got)


def test_packed_rows_on_another_device():
    from minitfm.finetuning import pack_conversations, packed_logits

    chats = [TEMPLATE.render(q + [{"role": "assistant", "content": "2"}]) for q in QUESTIONS]
    rows = pack_conversations(chats, 60)  # built on the CPU, as a caller builds them
    expected, got = on_both(lambda lm: packed_logits(lm, rows), byte_lm())
    assert same(expected, got)


def test_the_copy_task_and_one_batch_overfitting_on_another_device():
    from minitfm.generation.greedy import evaluate
    from minitfm.training.debugging import overfit_one_batch

    torch.manual_seed(0)
    model = m.EncoderDecoder(m.ModelConfig.copy_task(d_model=16, n_heads=2, n_layers=1, d_ff=32)).eval()
    batch = m.CopyTask(min_len=2, max_len=5).batch(3, torch.Generator().manual_seed(0))

    def run(model):
        on = batch.to(DEVICE) if _ACTIVE else batch
        return (evaluate(model, on), m.greedy_decode(model, on.src, 6),
                overfit_one_batch(model, on, steps=3, copy_model=True))

    expected, got = on_both(run, model)
    assert same(expected[1], got[1]) and same(expected[2], got[2]) and expected[0] == pytest.approx(got[0])


def test_a_classifier_without_a_pad_id_on_another_device():
    run = lambda lm: DecoderClassifier(lm, 2).eval()(moved([[256, 72, 105]]))  # noqa: E731
    expected, got = on_both(run, byte_lm())
    assert same(expected, got)
