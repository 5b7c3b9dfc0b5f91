"""Several eos ids in generate and beam_search (review 2026-12b M3), and a sliding-window cache that never costs more
than the plain one and never copies the history per step (M4)."""
import re

import pytest
import torch

from minitfm.config import ModelConfig
from minitfm.generation import beam_search, generate
from minitfm.generation.kv_memory import allocated_cache_bytes
from minitfm.layers.kv_cache import SlidingKVCache
from minitfm.models import DecoderOnlyLM

from counting import CountOps

PROMPT = torch.tensor([[1, 5, 6, 7], [3, 4, 9, 9]])


def lm(**overrides):
    torch.manual_seed(0)
    model = DecoderOnlyLM(ModelConfig.tiny(vocab_size=24, pad_id=None, **overrides)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)  # confident, varied greedy choices
    return model


# ---- M3: several eos ids ----

def _first_stop(row: list, ids) -> int:
    """Index in ``row`` of the first token in ``ids`` (len(row) if none)."""
    return next((i for i, t in enumerate(row) if t in ids), len(row))


@pytest.mark.parametrize("kind", [list, tuple, set, torch.tensor])
def test_generate_stops_each_row_at_any_of_several_eos_ids(kind):
    model = lm()
    free = generate(model, PROMPT, 12, eos_id=-1).new_tokens  # (2, 12) never stopping
    a, b = int(free[0, 3]), int(free[1, 5])  # an id each row meets
    ids = {a, b}
    out = generate(model, PROMPT, 12, eos_id=kind([a, b]))
    for row in range(2):
        stop = _first_stop(free[row].tolist(), ids)
        assert stop <= 5
        assert out.new_tokens[row, :stop + 1].tolist() == free[row, :stop + 1].tolist()
        assert bool(out.finished[row])
        assert set(out.new_tokens[row, stop + 1:].tolist()) <= {sorted(ids)[0] if kind is set else a}  # the fill
    assert out.new_tokens.shape[1] == max(_first_stop(r, ids) for r in free.tolist()) + 1
    single = generate(model, PROMPT, 12, eos_id=[a])
    assert torch.equal(single.tokens, generate(model, PROMPT, 12, eos_id=a).tokens)  # one id in a list: as before


def test_the_configs_eos_may_be_several_ids():
    model = lm()
    free = generate(model, PROMPT, 12, eos_id=-1).new_tokens
    a, b = int(free[0, 3]), int(free[1, 5])
    via_argument = generate(model, PROMPT, 12, eos_id=(a, b)).tokens
    object.__setattr__(model.config, "eos_id", (a, b)) if model.config.__dataclass_params__.frozen \
        else setattr(model.config, "eos_id", (a, b))
    assert torch.equal(generate(model, PROMPT, 12).tokens, via_argument)


def test_beam_search_ends_a_hypothesis_at_any_of_several_eos_ids():
    model = lm()
    free = beam_search(model, PROMPT[:1], 10, num_beams=3, eos_id=-1)
    a = int(free.new_tokens[0, 2])  # an id the best beam meets at its third step
    one = beam_search(model, PROMPT[:1], 10, num_beams=3, eos_id=a)
    assert torch.equal(beam_search(model, PROMPT[:1], 10, num_beams=3, eos_id=[a]).beams, one.beams)
    b = next(t for t in range(24) if t != a and t not in free.new_tokens[0].tolist()[:3])
    both = beam_search(model, PROMPT[:1], 10, num_beams=3, eos_id=[b, a])
    for beam in both.beams[0, :, 4:].tolist():  # every hypothesis ends at its first a or b, pads after
        stop = _first_stop(beam, {a, b})
        assert stop == len(beam) or all(t == b for t in beam[stop + 1:])
    assert a in both.new_tokens[0].tolist()


BAD_EOS = [([], ValueError, "eos_id must hold at least one id (or be -1: never stop early), got an empty list"),
           ([3, 24], ValueError, "every id of eos_id must be in [0, 23], got 24"),
           ([3, -1], ValueError, "every id of eos_id must be in [0, 23], got -1"),
           ([3, 2.0], TypeError, "every id of eos_id must be an int, got float (2.0)"),
           (torch.tensor([2.0]), TypeError, "eos_id as a tensor must be a 0-D or 1-D integer tensor of ids"),
           (torch.tensor([[2, 3]]), TypeError, "eos_id as a tensor must be a 0-D or 1-D integer tensor of ids"),
           ("2", TypeError, "eos_id must be an int, got str ('2')")]


@pytest.mark.parametrize("eos_id, error, message", BAD_EOS, ids=[repr(b[0]) for b in BAD_EOS])
def test_bad_eos_ids_are_refused_by_name(eos_id, error, message):
    for search in (generate, beam_search):
        with pytest.raises(error, match=re.escape(message)):
            search(lm(), PROMPT, 3, eos_id=eos_id)


# ---- M4: the sliding-window cache ----

def _windowed(window=5, max_seq_len=64):
    return ModelConfig.tiny(vocab_size=31, n_layers=3, max_seq_len=max_seq_len, pos="rope", sliding_window=window,
                            sliding_layers=(0, 2))


@pytest.mark.parametrize("max_len", [1, 4, 5, 6, 10, 11, 50])
def test_a_sliding_cache_never_allocates_more_than_the_plain_one(max_len):
    model = DecoderOnlyLM(_windowed()).eval()
    bounded = model.new_caches(2, max_len, bounded=True)
    plain = model.new_caches(2, max_len)
    assert allocated_cache_bytes([c.self_attn for c in bounded]) <= allocated_cache_bytes([c.self_attn for c in plain])
    assert bounded[0].self_attn.k.shape[2] == min(max_len, 2 * 5)  # more than 2 W positions: the ring's 2 W


def test_a_sliding_cache_for_a_short_generation_holds_only_its_positions():
    cache = SlidingKVCache(1, 2, 20, 8, window=4096)  # Mistral's window, a 20-token generation (review M4's repro)
    assert cache.k.shape[2] == 20  # before: 8192 slots


@pytest.mark.parametrize("max_len", [9, 40], ids=["plain layout", "ring"])
def test_a_decode_step_copies_only_its_own_key_and_value(max_len):
    w = 5
    cache = SlidingKVCache(1, 2, max_len, 4, window=w)
    cache.update(torch.randn(1, 2, 2, 4), torch.randn(1, 2, 2, 4))  # a short prompt
    for step in range(2, max_len):
        k_new, v_new = torch.randn(1, 2, 1, 4), torch.randn(1, 2, 1, 4)
        with CountOps() as counter:
            k, v = cache.update(k_new, v_new)
        assert counter.ops["cat"] == 0 and counter.ops["index_copy_"] == 0, (step, counter.ops)  # before: a cat
        assert counter.ops["copy_"] <= 4, counter.ops  # k and v, once (plain) or in both halves of the ring
        assert k.data_ptr() >= cache.k.data_ptr() and k._base is not None  # a view of the buffer
        assert k.shape[2] == min(step + 1, w)
        torch.testing.assert_close(k[:, :, -1:], k_new)


@pytest.mark.parametrize("max_len", [9, 10, 11, 40])
def test_both_layouts_keep_the_latest_window_in_order(max_len):
    cache = SlidingKVCache(1, 1, max_len, 1, window=3)
    for p in range(6):
        k, _ = cache.update(torch.full((1, 1, 1, 1), float(p)), torch.zeros(1, 1, 1, 1))
        assert k.flatten().tolist() == [float(j) for j in range(max(0, p - 2), p + 1)]
    k, _ = cache.update(torch.arange(6.0, 9.0).view(1, 1, 3, 1), torch.zeros(1, 1, 3, 1))
    assert k.flatten().tolist() == [3.0, 4.0, 5.0, 6.0, 7.0, 8.0]  # the held keys, then the new ones
    assert cache.get()[0].flatten().tolist() == [6.0, 7.0, 8.0] and cache.length == 9


@pytest.mark.parametrize("max_len", [9, 40], ids=["plain layout", "ring"])
@torch.no_grad()
def test_a_bounded_cache_computes_what_the_full_cache_does_in_both_layouts(max_len):
    torch.manual_seed(0)
    model = DecoderOnlyLM(_windowed()).eval()
    tokens = torch.randint(0, 31, (2, max_len))
    results = []
    for bounded in (False, True):
        caches = model.new_caches(2, max_len, bounded=bounded)
        steps = [model(tokens[:, :7], caches=caches)]  # a prefill longer than the window
        steps += [model(tokens[:, i:i + 1], caches=caches) for i in range(7, max_len)]
        results.append(torch.cat(steps, 1))
    assert (results[0] - results[1]).abs().max() < 1e-5
    fast = generate(model, tokens[:, :3], max_len - 3, eos_id=-1).tokens
    assert torch.equal(fast, generate(model, tokens[:, :3], max_len - 3, eos_id=-1, use_cache=False).tokens)
