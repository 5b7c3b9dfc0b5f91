import pytest

from minitfm.config import ModelConfig
from minitfm.generation.kv_memory import PUBLISHED_SHAPES
from minitfm.models import DecoderOnlyLM
from minitfm.params import count_params, estimate_params
from minitfm.training.scale import (
                                    FP32_ADAM,
                                    GB,
                                    MIXED_PRECISION_ADAM,
                                    STRATEGIES,
                                    TrainingMemory,
                                    TrainingShape,
                                    activation_bytes,
                                    format_decimal_bytes,
                                    memory_table,
                                    tensor_parallel_problem,
                                    training_memory_per_device,
                                    training_shape,
                                    )

LLAMA_7B = training_shape("Llama-2-7B")


def test_zero_paper_figure_1():
    # Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models" (SC20),
    # figure 1: Psi = 7.5B parameters, N_d = 64 devices, K = 12 -> 120 GB, 31.4 GB, 16.6 GB, 1.9 GB per device.
    published = {"dp": 120.0, "zero1": 31.4, "zero2": 16.6, "zero3": 1.9}
    for strategy, gb in published.items():
        memory = training_memory_per_device(7_500_000_000, strategy=strategy, n_devices=64)
        assert round(memory.total / GB, 1) == gb, strategy
        assert memory.activations == 0.0  # the figure counts model states only
    assert [line.split()[-2] for line in memory_table(7_500_000_000, (64,)).splitlines()[1:]] == \
        ["120.0", "31.4", "16.6", "1.9"]


def test_model_states_follow_the_formulas_for_any_sizes():
    psi, n, k = 1_000_003, 7, 8  # odd sizes, and the fp32 K = 8: nothing hides behind round numbers
    expected = {"dp": (4 * psi, 4 * psi, k * psi), "zero1": (4 * psi, 4 * psi, k * psi / n),
                "zero2": (4 * psi, 4 * psi / n, k * psi / n), "zero3": (4 * psi / n, 4 * psi / n, k * psi / n)}
    for strategy, parts in expected.items():
        memory = training_memory_per_device(psi, strategy=strategy, n_devices=n, **FP32_ADAM)
        assert (memory.weights, memory.gradients, memory.optimizer) == pytest.approx(parts), strategy
        assert memory.total == pytest.approx(sum(parts))
    for strategy in STRATEGIES:  # one device: nothing to shard
        assert training_memory_per_device(LLAMA_7B, strategy=strategy).total == 16 * LLAMA_7B.n_params


def test_mixed_precision_saves_no_model_state_memory_over_fp32_adam():
    mixed = training_memory_per_device(LLAMA_7B.n_params, **MIXED_PRECISION_ADAM)
    fp32 = training_memory_per_device(LLAMA_7B.n_params, **FP32_ADAM)
    assert mixed.total == fp32.total == 16 * LLAMA_7B.n_params  # 2 + 2 + 12 = 4 + 4 + 8
    assert (mixed.weights, mixed.optimizer) == (2 * LLAMA_7B.n_params, 12 * LLAMA_7B.n_params)
    assert (fp32.weights, fp32.optimizer) == (4 * LLAMA_7B.n_params, 8 * LLAMA_7B.n_params)


def test_activations_korthikanti_equations_by_hand():
    # Korthikanti et al. 2023, eq. 1: s b h (34 + 5 a s / h) per layer; eq. 2: s b h (10 + 24/t + 5 a s / (h t)).
    shape = TrainingShape("tiny", n_params=1000, n_layers=3, d_model=8, n_heads=2, n_kv_heads=2)
    s, b = 4, 2  # s b h = 64, 5 a s / h = 5
    assert activation_bytes(shape, s, b) == 3 * 64 * (34 + 5) == 7488
    assert activation_bytes(shape, s, b, tensor_parallel=2) == 3 * 64 * (10 + 12 + 2.5) == 4704
    assert activation_bytes(shape, s, b, flash_attention=True) == 3 * 64 * 34 == 6528  # no s x s term
    assert activation_bytes(shape, s, b, tensor_parallel=2, flash_attention=True) == 3 * 64 * 22


def test_activations_equal_the_papers_itemised_sum():
    # section 4.1: attention 11 sbh + 5 a s^2 b, MLP 19 sbh, two LayerNorms 4 sbh (fp16, 1-byte dropout masks)
    s, b, h, a, L = 4096, 1, LLAMA_7B.d_model, LLAMA_7B.n_heads, LLAMA_7B.n_layers
    # QKV input, Q and K, softmax output, its dropout mask, its dropout output, V, out-proj input, dropout mask
    attention = 2 * s * b * h + 2 * 2 * s * b * h + 2 * a * s * s * b + a * s * s * b + 2 * a * s * s * b \
        + 2 * s * b * h + 2 * s * b * h + s * b * h
    mlp = 2 * s * b * h + 8 * s * b * h + 8 * s * b * h + s * b * h  # input, GeLU input and output (4h), mask
    norms = 2 * 2 * s * b * h
    assert attention == 11 * s * b * h + 5 * a * s * s * b and mlp == 19 * s * b * h
    assert activation_bytes(LLAMA_7B, s, b) == L * (attention + mlp + norms)


def test_activations_without_dropout_by_hand():
    # No dropout: no 1-byte masks (two residual ones, one on the attention weights) and no dropout output, so
    # s b h (32 + 2 a s / h) per layer on one device and s b h (8 + 24/t + 2 a s / (h t)) with tensor parallelism.
    shape = TrainingShape("tiny", n_params=1000, n_layers=3, d_model=8, n_heads=2, n_kv_heads=2)
    s, b = 4, 2  # s b h = 64, 2 a s / h = 2
    assert activation_bytes(shape, s, b, dropout=False) == 3 * 64 * (32 + 2) == 6528
    assert activation_bytes(shape, s, b, tensor_parallel=2, dropout=False) == 3 * 64 * (8 + 12 + 1) == 4032
    assert activation_bytes(shape, s, b, flash_attention=True, dropout=False) == 3 * 64 * 32 == 6144
    assert activation_bytes(shape, s, b) == activation_bytes(shape, s, b, dropout=True) == 7488  # the default: GPT


def test_activations_without_dropout_equal_the_itemised_sum():
    # section 4.1's items without the three dropout entries: the value product reads the softmax output itself
    s, b, h, a, L = 4096, 1, LLAMA_7B.d_model, LLAMA_7B.n_heads, LLAMA_7B.n_layers
    # QKV input, Q and K, softmax output, V, out-proj input
    attention = 2 * s * b * h + 2 * 2 * s * b * h + 2 * a * s * s * b + 2 * s * b * h + 2 * s * b * h
    mlp = 2 * s * b * h + 8 * s * b * h + 8 * s * b * h  # input, GeLU input and output (4h)
    norms = 2 * 2 * s * b * h
    assert activation_bytes(LLAMA_7B, s, b, dropout=False) == L * (attention + mlp + norms) == 51_539_607_552
    # Llama-2-7B at 4,096 tokens: about 52 GB without dropout against about 104 GB with it
    assert round(activation_bytes(LLAMA_7B, s, b) / GB, 1) == 104.2
    assert round(activation_bytes(LLAMA_7B, s, b, dropout=False) / GB, 1) == 51.5


def test_dropout_flag_decides_whether_zero3_fits_llama_on_80_gb():
    kwargs = dict(strategy="zero3", n_devices=8, seq_len=4096)
    gpt_count = training_memory_per_device(LLAMA_7B, **kwargs)  # dropout=True, the default
    llama = training_memory_per_device(LLAMA_7B, **kwargs, dropout=False)
    assert llama.model_states == gpt_count.model_states == 16 * LLAMA_7B.n_params / 8
    assert llama.activations == activation_bytes(LLAMA_7B, 4096, dropout=False)
    assert gpt_count.activations > 80 * GB > llama.total  # 104 GB of activations alone; about 65 GB in all
    assert round(llama.total / GB) == 65
    flash = [training_memory_per_device(LLAMA_7B, **kwargs, flash_attention=True, dropout=d) for d in (True, False)]
    assert flash[0].activations - flash[1].activations == LLAMA_7B.n_layers * 2 * 4096 * LLAMA_7B.d_model  # 2 masks
    tp = training_memory_per_device(LLAMA_7B, strategy="tp", n_devices=8, seq_len=4096, dropout=False)
    assert tp.activations == activation_bytes(LLAMA_7B, 4096, tensor_parallel=8, dropout=False)


def test_zero_keeps_activations_and_tensor_parallelism_splits_them():
    kwargs = dict(n_devices=8, seq_len=4096, micro_batch=2)
    dp = training_memory_per_device(LLAMA_7B, strategy="dp", **kwargs)
    zero3 = training_memory_per_device(LLAMA_7B, strategy="zero3", **kwargs)
    tp = training_memory_per_device(LLAMA_7B, strategy="tp", **kwargs)
    assert dp.activations == zero3.activations == activation_bytes(LLAMA_7B, 4096, 2)
    assert tp.activations == activation_bytes(LLAMA_7B, 4096, 2, tensor_parallel=8) < dp.activations / 4
    assert tp.model_states == zero3.model_states == 16 * LLAMA_7B.n_params / 8


def test_training_shape_from_published_and_book_models():
    published = PUBLISHED_SHAPES["Llama-2-7B"]
    assert (LLAMA_7B.n_params, LLAMA_7B.d_model, LLAMA_7B.n_heads, LLAMA_7B.n_layers) == \
        (published.n_params, 4096, 32, 32)
    assert training_shape("Llama-2-70B").n_kv_heads == 8
    config = ModelConfig.small_lm()
    book = training_shape(config, name="small LM")
    assert book.n_params == count_params(DecoderOnlyLM(config))["total"] and book.name == "small LM"


def test_tensor_parallel_simplification_is_small_for_llama():
    # We divide every parameter by N; Megatron keeps the norms whole. Llama-2-7B in this library's config
    # has exactly the published parameter count, of which the norms are under 0.01%.
    config = ModelConfig(vocab_size=32000, d_model=4096, n_heads=32, d_ff=11008, n_layers=32, max_seq_len=4096,
                         norm="rms", pos="rope", ffn="swiglu", bias=False, tie_embeddings=False)
    counts = estimate_params(config)
    assert counts["total"] == LLAMA_7B.n_params
    assert counts["norms"] / counts["total"] < 1e-4


def test_memory_table_rows_columns_and_impossible_tensor_parallel_cells():
    table = memory_table(LLAMA_7B, (1, 8, 64)).splitlines()
    assert table[0].split()[-3:] == ["N=1", "N=8", "N=64"]
    assert [row.split("  ")[0] for row in table[1:]] == ["data parallel", "ZeRO-1", "ZeRO-2", "ZeRO-3",
                                                         "tensor parallel"]
    assert table[-1].split()[-3:] == ["13.5", "GB", "-"]  # 32 heads do not split 64 ways
    assert table[4].split()[-2:] == ["1.7", "GB"]  # ZeRO-3, 64 devices: 16 x 6.74e9 / 64
    assert len(memory_table(7_500_000_000).splitlines()) == 5  # a bare count: no tensor-parallel row


def test_format_decimal_bytes():
    assert format_decimal_bytes(1.875e9) == "1.9 GB"
    assert format_decimal_bytes(13_100_000) == "13.1 MB"
    assert format_decimal_bytes(1.078e12) == "1.1 TB"
    assert format_decimal_bytes(512) == "512 B"


def test_training_memory_dataclass():
    memory = TrainingMemory(weights=1.0, gradients=2.0, optimizer=3.0, activations=4.0)
    assert (memory.model_states, memory.total) == (6.0, 10.0)
    with pytest.raises(AttributeError):
        memory.weights = 5.0  # frozen


def test_bad_input_gives_clear_errors():
    with pytest.raises(ValueError, match="strategy must be one of 'dp', 'zero1', 'zero2', 'zero3', 'tp'; got 'zero4'"):
        training_memory_per_device(10, strategy="zero4")
    with pytest.raises(ValueError, match="n_devices must be >= 1, got 0"):
        training_memory_per_device(10, n_devices=0)
    with pytest.raises(TypeError, match="n_devices must be an int"):
        training_memory_per_device(10, n_devices=2.0)
    with pytest.raises(ValueError, match="n_heads=32, which does not divide by n_devices=64"):
        training_memory_per_device(LLAMA_7B, strategy="tp", n_devices=64)
    assert "n_kv_heads=8" in tensor_parallel_problem(training_shape("Llama-2-70B"), 16)
    assert tensor_parallel_problem(training_shape("Llama-2-70B"), 8) is None
    with pytest.raises(TypeError, match="strategy='tp' needs the model's layers and heads"):
        training_memory_per_device(10, strategy="tp", n_devices=2)
    with pytest.raises(TypeError, match=r"seq_len \(activations\) needs"):
        training_memory_per_device(10, seq_len=128)
    with pytest.raises(ValueError, match="optimizer_bytes_per_param must be >= 0"):
        training_memory_per_device(10, optimizer_bytes_per_param=-4)
    with pytest.raises(ValueError, match="unknown published model 'GPT-5'; choose from"):
        training_shape("GPT-5")
    with pytest.raises(TypeError, match="model must be a published model's name, a ModelShape or a ModelConfig"):
        training_shape(7_000_000_000)
    with pytest.raises(TypeError, match="flash_attention must be a bool"):
        activation_bytes(LLAMA_7B, 128, flash_attention="yes")
    with pytest.raises(TypeError, match="dropout must be a bool, got float"):
        training_memory_per_device(LLAMA_7B, seq_len=128, dropout=0.1)
    with pytest.raises(ValueError, match="n_heads must be >= 1"):
        TrainingShape("broken", 10, 1, 8, 0, 1)
