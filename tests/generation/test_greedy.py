import pytest
import torch

from minitfm.config import ModelConfig
from minitfm.data import CopyTask, pad_sequences
from minitfm.generation import generate
from minitfm.generation.greedy import evaluate, exact_match, greedy_decode, token_accuracy
from minitfm.models import DecoderOnlyLM, EncoderDecoder
from minitfm.training import TrainConfig, set_seed, train


def test_metrics_by_hand():
    target = torch.tensor([[5, 6, 2], [7, 2, 0]])
    pred = torch.tensor([[5, 6, 2, 0], [7, 3, 2, 0]])  # row 1 has one wrong token and a late EOS
    assert exact_match(pred, target, 0) == 0.5
    assert token_accuracy(pred, target, 0) == pytest.approx(4 / 5)
    assert exact_match(target[:, :2], target, 0) == 0.5  # a missing EOS is a miss
    with pytest.raises(ValueError, match="same batch size"):
        exact_match(pred[:1], target, 0)


@pytest.mark.parametrize("pos", ["sinusoidal", "rope", "alibi", "learned"])
def test_encoder_decoder_greedy_cached_equals_uncached(pos):
    model = EncoderDecoder(ModelConfig.tiny(vocab_size=13, pos=pos, n_kv_heads=1)).eval()
    src = torch.randint(3, 13, (3, 6))
    src[2, 4:] = 0
    cached = greedy_decode(model, src, 10)
    assert torch.equal(cached, greedy_decode(model, src, 10, use_cache=False))
    assert cached.shape[0] == 3 and cached.shape[1] <= 10


@pytest.mark.parametrize("pos", ["sinusoidal", "rope", "alibi", "learned", "none"])
def test_decoder_only_greedy_with_left_padded_prompts(pos):
    model = DecoderOnlyLM(ModelConfig.tiny(vocab_size=13, pos=pos, norm_first=False)).eval()
    prompts = [torch.randint(3, 13, (5,)), torch.randint(3, 13, (2,))]
    batch = pad_sequences(prompts, 0, side="left")
    cached = greedy_decode(model, batch, 8)
    assert torch.equal(cached, greedy_decode(model, batch, 8, use_cache=False))
    for i, prompt in enumerate(prompts):  # each row equals decoding its prompt alone
        alone = greedy_decode(model, prompt[None], 8)
        assert torch.equal(cached[i, :alone.shape[1]], alone[0])


@pytest.mark.parametrize("pad_id", [0, None])
def test_rows_stop_at_eos_and_are_padded_after(pad_id):
    model = DecoderOnlyLM(ModelConfig.tiny(vocab_size=13, pad_id=pad_id)).eval()
    with torch.no_grad():
        model.lm_head.weight = torch.nn.Parameter(torch.zeros(13, 16))  # untie: logits from the bias trick below
        model.lm_head.bias = torch.nn.Parameter(torch.zeros(13))
        model.lm_head.bias[2] = 1.0  # EOS always wins
    out = greedy_decode(model, torch.tensor([[5, 6], [7, 8]]), 6)
    assert out.tolist() == [[2], [2]]  # every row finished after one step: decoding stopped


@pytest.mark.parametrize("pad_id", [0, None])
@pytest.mark.parametrize("use_cache", [True, False])
def test_decoder_only_greedy_decode_equals_generate(pad_id, use_cache):
    # issue 33: with pad_id=None (every loaded checkpoint) greedy_decode used to crash in its own second loop
    torch.manual_seed(0)
    model = DecoderOnlyLM(ModelConfig.tiny(vocab_size=13, pad_id=pad_id, pos="rope")).eval()
    prompt = torch.randint(3, 13, (2, 4), generator=torch.Generator().manual_seed(0))
    out = greedy_decode(model, prompt, 8, use_cache=use_cache)
    assert out.shape[0] == 2 and 1 <= out.shape[1] <= 8
    assert torch.equal(out, generate(model, prompt, 8, use_cache=False).new_tokens)
    assert not model.training


@pytest.mark.parametrize("pad_id", [0, None])
@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_decode_fills_rows_that_finished_and_stops_when_all_have(pad_id, use_cache):
    model = DecoderOnlyLM(ModelConfig.tiny(vocab_size=13, pad_id=pad_id)).eval()
    script = torch.tensor([[5, 6], [2, 6], [7, 2], [7, 7]])  # step x row: row 0 ends at step 2, row 1 at 3
    calls = []

    def scripted(tokens, **kwargs):  # (B, T) -> (B, T, V) whose last position picks the script's token
        calls.append(tokens.shape[1])
        logits = torch.nn.functional.one_hot(script[len(calls) - 1], 13).float()  # (B, V)
        return logits[:, None].expand(-1, tokens.shape[1], -1)

    model.forward = scripted  # the lean decode step steps aside for a replaced forward
    out = greedy_decode(model, torch.tensor([[1, 5], [1, 6]]), 4, use_cache=use_cache)
    fill = 2 if pad_id is None else pad_id  # a model without a padding token fills with eos
    assert out.tolist() == [[5, 2, fill], [6, 6, 2]]  # row 0's third token (7) was replaced by the fill
    assert len(calls) == 3  # no fourth step once every row had produced EOS


def test_encoder_decoder_greedy_may_use_every_position():
    # the decoder reads BOS and N - 1 generated tokens: N = max_seq_len fits (the budget greedy_decode checks)
    torch.manual_seed(0)
    model = EncoderDecoder(ModelConfig.tiny(vocab_size=13, max_seq_len=8, pos="learned")).eval()
    src = torch.tensor([[5, 6, 7]])
    out = greedy_decode(model, src, 8)
    assert out.shape[1] <= 8 and torch.equal(out, greedy_decode(model, src, 8, use_cache=False))


def test_greedy_decode_rejects_bad_arguments():
    model = EncoderDecoder(ModelConfig.tiny(vocab_size=13))
    with pytest.raises(ValueError, match="max_new_tokens must be >= 1"):
        greedy_decode(model, torch.tensor([[3]]), 0)
    with pytest.raises(TypeError, match="EncoderDecoder or DecoderOnlyLM"):
        greedy_decode(torch.nn.Linear(2, 2), torch.tensor([[3]]), 2)


def test_tiny_copy_task_reaches_100_percent():
    task = CopyTask(n_symbols=10, min_len=4, max_len=4)  # short sequences: a few seconds of training
    set_seed(0)
    model = EncoderDecoder(ModelConfig.copy_task(max_seq_len=8))
    cfg = TrainConfig.copy_task(steps=180, batch_size=64, warmup=20)
    train(model, task.batches(cfg.batch_size, seed=0), cfg, progress=False)
    scores = evaluate(model, task.batch(200, torch.Generator().manual_seed(99)))
    assert scores == {"exact_match": 1.0, "token_accuracy": 1.0}


@pytest.mark.parametrize("model_cls", [EncoderDecoder, DecoderOnlyLM])
def test_greedy_decode_names_the_expected_input_rank(model_cls):
    model = model_cls(ModelConfig.tiny(vocab_size=13))
    with pytest.raises(ValueError, match=r"inputs must have 2 dimensions, got 1 with shape \(3,\)"):
        greedy_decode(model, torch.tensor([3, 4, 5]), 2)  # one unbatched prompt: needs prompt[None]
