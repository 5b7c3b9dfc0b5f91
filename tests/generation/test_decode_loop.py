import itertools
import math
import re

import pytest
import torch

from minitfm.config import ModelConfig
from minitfm.generation import beam_search, generate
from minitfm.generation.sampling import RepetitionPenalty, Temperature, TopK, TopP
from minitfm.layers.kv_cache import ConcatKVCache, KVCache
from minitfm.models import DecoderOnlyLM, EncoderDecoder

POSITIONS = ["sinusoidal", "learned", "rope", "alibi", "none"]
EOS, PAD = 2, 0



def lm(**overrides):
    torch.manual_seed(0)
    return DecoderOnlyLM(ModelConfig.tiny(**overrides))


def padded_prompt():
    # two prompts of lengths 3 and 5, left-padded; no eos inside
    return torch.tensor([[PAD, PAD, 1, 5, 6], [1, 7, 8, 9, 3]])


def never_eos(tokens, logits):
    """A processor that forbids <eos> (and <pad>), so every row runs the full length."""
    return logits.index_fill(-1, torch.tensor([EOS, PAD]), float("-inf"))


@pytest.mark.parametrize("pos", POSITIONS)
@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("n_kv_heads", [None, 1])
@pytest.mark.parametrize("pad_id", [PAD, None])
def test_decoder_only_cached_equals_uncached(pos, norm_first, n_kv_heads, pad_id):
    model = lm(pos=pos, norm_first=norm_first, n_kv_heads=n_kv_heads, pad_id=pad_id)
    prompt = padded_prompt()
    # a model without a padding token (pad_id=None, as every loaded checkpoint) learns of the padding from a mask
    kwargs = dict(processors=[never_eos], return_logits=True, prompt_mask=None if pad_id == PAD else prompt != PAD)
    ref = generate(model, prompt, 12, use_cache=False, **kwargs)
    assert ref.new_tokens.shape == (2, 12)
    for cache_cls in (KVCache, ConcatKVCache):
        out = generate(model, prompt, 12, cache_cls=cache_cls, **kwargs)
        assert torch.equal(out.tokens, ref.tokens)
        torch.testing.assert_close(out.logits, ref.logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("pos", POSITIONS)
def test_left_padding_gives_what_the_prompt_gives_alone(pos):
    model = lm(pos=pos)
    batch = generate(model, padded_prompt(), 8, processors=[never_eos], return_logits=True)
    alone = generate(model, padded_prompt()[:1, 2:], 8, processors=[never_eos], return_logits=True)
    assert torch.equal(batch.new_tokens[:1], alone.new_tokens)
    torch.testing.assert_close(batch.logits[:1], alone.logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("pos", POSITIONS)
@pytest.mark.parametrize("norm_first", [True, False])
def test_encoder_decoder_cached_equals_uncached(pos, norm_first):
    torch.manual_seed(0)
    model = EncoderDecoder(ModelConfig.tiny(pos=pos, norm_first=norm_first, n_kv_heads=1))
    src = torch.tensor([[1, 5, 6, 7, 2, PAD], [1, 8, 9, 2, PAD, PAD]])  # right-padded source
    start = torch.ones(2, 1, dtype=torch.long)
    ref = generate(model, start, 10, src=src, use_cache=False, processors=[never_eos], return_logits=True)
    for cache_cls in (KVCache, ConcatKVCache):
        out = generate(model, start, 10, src=src, cache_cls=cache_cls, processors=[never_eos], return_logits=True)
        assert torch.equal(out.tokens, ref.tokens)
        torch.testing.assert_close(out.logits, ref.logits, atol=1e-5, rtol=1e-5)
    # the second row's source padding does not change its output
    alone = generate(model, start[1:], 10, src=src[1:, :4], processors=[never_eos], return_logits=True)
    torch.testing.assert_close(alone.logits, ref.logits[1:], atol=1e-5, rtol=1e-5)


def test_greedy_is_the_argmax_of_the_logits():
    model = lm()
    out = generate(model, padded_prompt(), 6, processors=[never_eos], return_logits=True)
    masked = out.logits.index_fill(-1, torch.tensor([EOS, PAD]), float("-inf"))
    assert torch.equal(out.new_tokens, masked.argmax(-1))
    assert len(out.step_times) == 6 and all(t > 0 for t in out.step_times)


@pytest.mark.parametrize("pad_id", [PAD, None])
def test_rows_stop_at_eos_independently(pad_id):
    model = lm(pad_id=pad_id)
    fill = EOS if pad_id is None else PAD  # what a stopped row holds: pad, or eos for a model without pad
    mask = None if pad_id == PAD else padded_prompt() != PAD

    def eos_for_row0_at_step2(tokens, logits):
        logits = never_eos(tokens, logits)
        if tokens.shape[1] == 5 + 2:
            logits[0, EOS] = 1e4  # logits is a fresh tensor here: never_eos returned a copy
        return logits

    out = generate(model, padded_prompt(), 6, processors=[eos_for_row0_at_step2], prompt_mask=mask)
    assert out.new_tokens[0, 2] == EOS and (out.new_tokens[0, 3:] == fill).all()
    assert (out.new_tokens[1] != EOS).all() and (out.new_tokens[1] != PAD).all()
    assert out.finished.tolist() == [True, False]

    def always_eos(tokens, logits):
        return torch.full_like(logits, -1e4).index_fill(-1, torch.tensor([EOS]), 0.0)

    out = generate(model, padded_prompt(), 6, processors=[always_eos], prompt_mask=mask)
    assert out.new_tokens.shape == (2, 1) and out.finished.all()  # the loop ends when every row stopped


def test_same_generator_seed_same_text():
    model = lm()
    procs = [Temperature(1.5), TopK(10), TopP(0.95)]

    def sample(seed, **kw):
        g = torch.Generator().manual_seed(seed)
        return generate(model, padded_prompt(), 15, processors=procs + [never_eos], do_sample=True, generator=g, **kw)

    assert torch.equal(sample(1).tokens, sample(1).tokens)
    assert not torch.equal(sample(1).tokens, sample(2).tokens)
    assert torch.equal(sample(3).tokens, sample(3, use_cache=False).tokens)


def test_sampling_respects_top_k():
    model = lm()
    out = generate(model, padded_prompt(), 10, processors=[never_eos], return_logits=True)
    g = torch.Generator().manual_seed(0)
    # with TopK(1) sampling can only pick the argmax: it must equal greedy
    sampled = generate(model, padded_prompt(), 10, processors=[never_eos, TopK(1)], do_sample=True, generator=g)
    assert torch.equal(sampled.tokens, out.tokens)


def test_repetition_penalty_changes_greedy_output():
    model = lm()
    plain = generate(model, padded_prompt(), 15, processors=[never_eos])
    penalised = generate(model, padded_prompt(), 15, processors=[never_eos, RepetitionPenalty(50.0)])
    repeats = lambda t: sum(len(r) - len(set(r)) for r in t.new_tokens.tolist())  # noqa: E731
    assert repeats(penalised) < repeats(plain)


def forbid_eos(model):
    """Give <eos> probability 0 in every forward pass (a hook on the output layer), so no beam finishes."""
    no_eos = torch.tensor([EOS])
    model.lm_head.register_forward_hook(lambda module, args, out: out.index_fill(-1, no_eos, float("-inf")))
    return model


def test_beam_with_one_beam_and_no_eos_equals_greedy():
    # one live beam takes the best non-eos token every step; finished hypotheses aside, that is greedy
    model = forbid_eos(lm(pos="rope", n_kv_heads=1))
    greedy = generate(model, padded_prompt(), 10)
    beam = beam_search(model, padded_prompt(), 10, num_beams=1)
    assert torch.equal(beam.tokens, greedy.tokens)
    torch.manual_seed(0)
    ed = forbid_eos(EncoderDecoder(ModelConfig.tiny()))
    src, start = torch.tensor([[1, 5, 6, 2], [1, 7, 2, PAD]]), torch.ones(2, 1, dtype=torch.long)
    assert torch.equal(beam_search(ed, start, 8, num_beams=1, src=src).tokens,
                       generate(ed, start, 8, src=src).tokens)


def test_beam_search_without_eos_runs_every_beam_to_the_end():
    model = lm()
    out = beam_search(model, padded_prompt(), 8, num_beams=3, eos_id=-1)
    assert out.new_tokens.shape == (2, 8)
    # with eos turned off the beams are the K best sequences of 8 tokens, eos included as an ordinary token
    prompts = [row[row != PAD].tolist() for row in padded_prompt()]
    scores = [_sequence_score(model.eval(), prefix, new.tolist(), 1.0) for prefix, new in zip(prompts, out.new_tokens)]
    torch.testing.assert_close(out.scores, torch.tensor(scores), atol=1e-4, rtol=0)


def bigram_lm(next_probs, vocab_size):
    """A tiny LM rigged to predict ``next_probs[last token]`` ({token: probability}; the rest shares 1e-6).

    The real model still runs (so its caches fill and are reordered as usual); a hook replaces its logits.
    """
    table = torch.full((vocab_size, vocab_size), 1e-6)
    for prev, probs in next_probs.items():
        for tok, prob in probs.items():
            table[prev, tok] = prob
    logits = (table / table.sum(-1, keepdim=True)).log()  # (V, V): row = previous token
    model = lm(vocab_size=vocab_size)
    model.register_forward_hook(lambda module, args, out: logits[args[0]])  # (B, T) -> (B, T, V)
    return model


def test_finished_beam_is_not_pushed_out_by_live_beams():
    # after <bos>, <eos> (0.25) is the second best of 2 beams; both continuations of "3" (0.35 each) beat it at
    # the next step, then fall to 0.175, 0.0875, ... A beam search that keeps finished beams in the K slots loses
    # the finished one; with a separate list of finished hypotheses it is returned.
    model = bigram_lm({1: {3: 0.7, EOS: 0.25, 4: 0.05}, 3: {5: 0.5, 6: 0.5},
                       5: {5: 0.5, 6: 0.5}, 6: {5: 0.5, 6: 0.5}}, vocab_size=8)
    out = beam_search(model, torch.tensor([[1]]), 6, num_beams=2, length_penalty=0.0)
    assert out.new_tokens[0, 0].item() == EOS and (out.new_tokens[0, 1:] == PAD).all()
    assert out.scores[0].item() == pytest.approx(math.log(0.25), abs=1e-4)
    assert (out.beam_scores[0, 1:] <= out.beam_scores[0, 0]).all()


def test_finished_beam_wins_under_length_penalty():
    # with length_penalty=1 hypotheses are ranked by mean log-probability per token. [<eos>] scores log 0.3;
    # the two live beams through "3" (0.31 each at step 2) push it out of a 2-slot beam, then lose
    # log 7 per token: after 6 tokens their mean is below log 0.3
    spread = {t: 1 / 7 for t in range(5, 12)}
    model = bigram_lm({1: {3: 0.62, EOS: 0.3, 4: 0.08}, 3: {5: 0.5, 6: 0.5}, **{t: spread for t in range(5, 12)}},
                      vocab_size=12)
    out = beam_search(model, torch.tensor([[1]]), 6, num_beams=2, length_penalty=1.0)
    assert out.new_tokens[0, 0].item() == EOS
    assert out.scores[0].item() == pytest.approx(math.log(0.3), abs=1e-4)
    best_live = (math.log(0.62) + math.log(0.5) + 4 * math.log(1 / 7)) / 6
    assert out.scores[0].item() > best_live + 0.1


def test_beam_search_stops_when_no_live_beam_can_win():
    # <eos> is likely after every token: after 2 steps the 2 finished hypotheses (0.9 and 0.09) beat the best
    # live beam's 0.01, which can only fall, so the search stops long before max_new_tokens
    model = bigram_lm({t: {EOS: 0.9, 3: 0.06, 4: 0.04} for t in (1, 3, 4)}, vocab_size=6)
    prompt = torch.tensor([[1], [1]])
    out = beam_search(model, prompt, 20, num_beams=2, length_penalty=0.0)
    assert out.new_tokens.shape == (2, 2)
    assert out.new_tokens[:, 0].tolist() == [EOS, EOS]
    assert out.beams[0, 1, 1:].tolist() == [3, EOS]
    torch.testing.assert_close(out.beam_scores[0], torch.tensor([math.log(0.9), math.log(0.06 * 0.9)]))
    # with length_penalty=1 a live beam's best possible score is its sum / 20 (the longest it may grow), so the
    # search runs on until the live sums (about log 0.06 per step) make even that hopeless: later, but not to 20
    long = beam_search(model, prompt, 20, num_beams=2, length_penalty=1.0)
    assert 2 < long.new_tokens.shape[1] < 20 and long.new_tokens[0, 0].item() == EOS


def _sequence_score(model, prefix, seq, length_penalty):
    tokens = torch.tensor([prefix + seq])
    logp = model(tokens).log_softmax(-1)[0]  # (T, V)
    total = sum(logp[len(prefix) - 1 + i, tok].item() for i, tok in enumerate(seq))
    return total / len(seq) ** length_penalty


@pytest.mark.parametrize("length_penalty", [0.0, 1.0])
def test_wide_beam_finds_the_best_sequence(length_penalty):
    # vocabulary of 5 and 3 new tokens: 5 + 5^2 + 5^3 candidate sequences, few enough to score them all
    model = lm(vocab_size=5)
    model.eval()
    v, n, prefix = 5, 3, [1]
    candidates = [list(s) for length in range(1, n + 1) for s in itertools.product(range(v), repeat=length)
                  if EOS not in s[:-1] and (s[-1] == EOS or length == n)]
    with torch.no_grad():
        scores = {tuple(s): _sequence_score(model, prefix, s, length_penalty) for s in candidates}
    best = max(scores, key=scores.get)
    out = beam_search(model, torch.tensor([prefix]), n, num_beams=v ** n, length_penalty=length_penalty,
                      use_cache=True)
    found = [t for t in out.new_tokens[0].tolist()]
    found = found[: found.index(EOS) + 1] if EOS in found else found
    assert tuple(found) == best
    assert out.scores[0].item() == pytest.approx(scores[best], abs=1e-4)
    # a narrow beam may miss it, but never reports a better score than the true best
    narrow = beam_search(model, torch.tensor([prefix]), n, num_beams=2, length_penalty=length_penalty)
    assert narrow.scores[0].item() <= scores[best] + 1e-4


def test_beam_search_cached_equals_uncached_and_batches():
    model = lm(pos="alibi")
    a = beam_search(model, padded_prompt(), 8, num_beams=3)
    b = beam_search(model, padded_prompt(), 8, num_beams=3, use_cache=False)
    c = beam_search(model, padded_prompt(), 8, num_beams=3, cache_cls=ConcatKVCache)
    assert torch.equal(a.beams, b.beams) and torch.equal(a.beams, c.beams)
    torch.testing.assert_close(a.beam_scores, b.beam_scores)
    assert (a.beam_scores[:, :-1] >= a.beam_scores[:, 1:]).all()  # best first
    alone = beam_search(model, padded_prompt()[:1, 2:], 8, num_beams=3)
    assert torch.equal(alone.new_tokens, a.new_tokens[:1, : alone.new_tokens.shape[1]])


def test_encoder_decoder_beam_search_cached_equals_uncached():
    torch.manual_seed(0)
    ed = EncoderDecoder(ModelConfig.tiny(n_kv_heads=1))
    src, start = torch.tensor([[1, 5, 6, 2], [1, 7, 2, PAD]]), torch.ones(2, 1, dtype=torch.long)
    a = beam_search(ed, start, 8, num_beams=3, src=src)
    b = beam_search(ed, start, 8, num_beams=3, src=src, use_cache=False)
    assert torch.equal(a.beams, b.beams)
    torch.testing.assert_close(a.beam_scores, b.beam_scores)


def test_generate_restores_training_mode():
    model = lm(dropout=0.1)
    model.train()
    generate(model, padded_prompt(), 3)
    beam_search(model, padded_prompt(), 3, num_beams=2)
    assert model.training


def test_bad_input_raises():
    model = lm()
    prompt = padded_prompt()
    with pytest.raises(ValueError, match="exceeds the model's max_seq_len=32"):
        generate(model, prompt, 40)
    with pytest.raises(ValueError, match="at least one token that is not pad_id"):
        generate(model, torch.tensor([[PAD, PAD], [1, 5]]), 3)
    with pytest.raises(ValueError, match="do not pass src"):
        generate(model, prompt, 3, src=prompt)
    with pytest.raises(ValueError, match="max_new_tokens must be >= 1"):
        generate(model, prompt, 0)
    with pytest.raises(TypeError, match="must be a DecoderOnlyLM or an EncoderDecoder"):
        generate(torch.nn.Linear(2, 2), prompt, 3)
    with pytest.raises(ValueError, match="num_beams must be >= 1"):
        beam_search(model, prompt, 3, num_beams=0)
    with pytest.raises(ValueError, match=r"eos_id must be in \[-1, 15\]"):
        beam_search(model, prompt, 3, eos_id=16)
    ed = EncoderDecoder(ModelConfig.tiny())
    with pytest.raises(ValueError, match="needs the source"):
        generate(ed, prompt, 3)
    with pytest.raises(ValueError, match="cannot be padded"):
        generate(ed, prompt, 3, src=prompt)
    with pytest.warns(UserWarning, match="do_sample=True"):
        generate(model, prompt, 2, processors=[Temperature(0.5)])


@pytest.mark.parametrize("pos", POSITIONS)
@pytest.mark.parametrize("n_kv_heads", [None, 1])
@pytest.mark.parametrize("pad_id", [PAD, None])
def test_unpadded_prompts_take_the_maskless_decode_step_and_match_recompute(pos, n_kv_heads, pad_id):
    # Without padding, generate passes no key mask and each cached step has one query, so the model uses
    # no mask at all and fused attention: the result must still be what recomputing the prefix gives.
    model = lm(pos=pos, n_kv_heads=n_kv_heads, pad_id=pad_id)
    prompt = torch.tensor([[1, 5, 6, 7], [1, 8, 3, 9]])
    kwargs = dict(processors=[never_eos], return_logits=True)
    ref = generate(model, prompt, 10, use_cache=False, **kwargs)
    out = generate(model, prompt, 10, **kwargs)
    assert torch.equal(out.tokens, ref.tokens)
    torch.testing.assert_close(out.logits, ref.logits, atol=1e-5, rtol=1e-5)


# ---- bad input: a clear error naming what was expected and what arrived (issue 34) ----

RIGHT_MASK = torch.tensor([[True, True, True, False, False], [True] * 5])  # row 0 right-padded
RIGHT_PROMPT = torch.tensor([[1, 5, 6, PAD, PAD], [1, 7, 8, 9, 3]])
BAD_CALLS = [
    ("right-padded prompt_mask", lambda m: generate(m, RIGHT_PROMPT, 3, prompt_mask=RIGHT_MASK), ValueError,
     "prompt_mask must be left-padded: row 0 has a pad at position 3 after a real token (its last real token is at "
     "position 2 of 5)"),
    ("right-padded prompt_mask, no pad_id", lambda m: generate(lm(pad_id=None), RIGHT_PROMPT, 3, prompt_mask=RIGHT_MASK),
     ValueError, "prompt_mask must be left-padded: row 0 has a pad at position 3"),
    ("right-padded prompt_mask, beam search", lambda m: beam_search(m, RIGHT_PROMPT, 3, prompt_mask=RIGHT_MASK),
     ValueError, "prompt_mask must be left-padded: row 0 has a pad at position 3"),
    ("right-padded prompt, from pad_id", lambda m: generate(m, RIGHT_PROMPT, 3), ValueError,
     f"the prompt (pad_id={PAD}) must be left-padded: row 0 has a pad at position 3 after a real token"),
    ("right-padded prompt, beam search", lambda m: beam_search(m, RIGHT_PROMPT.flip(0), 3, num_beams=2), ValueError,
     f"the prompt (pad_id={PAD}) must be left-padded: row 1 has a pad at position 3"),
    ("prompt_mask int", lambda m: generate(m, padded_prompt(), 3, prompt_mask=(padded_prompt() != PAD).long()),
     ValueError, "prompt_mask must be bool with the prompt's shape (2, 5), True = real token, got torch.int64 (2, 5)"),
    ("prompt_mask wrong shape", lambda m: generate(m, padded_prompt(), 3, prompt_mask=torch.ones(2, 4, dtype=torch.bool)),
     ValueError, "prompt_mask must be bool with the prompt's shape (2, 5), True = real token, got torch.bool (2, 4)"),
    ("prompt_mask 1-D", lambda m: generate(m, padded_prompt(), 3, prompt_mask=torch.ones(5, dtype=torch.bool)),
     ValueError, "prompt_mask must have 2 dimensions, got 1 with shape (5,)"),
    ("prompt_mask a list", lambda m: generate(m, padded_prompt(), 3, prompt_mask=[[True] * 5] * 2), TypeError,
     "prompt_mask must be a torch.Tensor, got list"),
    ("max_new_tokens negative", lambda m: generate(m, padded_prompt(), -2), ValueError, "max_new_tokens must be >= 1, got -2"),
    ("max_new_tokens bool", lambda m: generate(m, padded_prompt(), True), TypeError, "max_new_tokens must be an int, got bool"),
    ("max_new_tokens float", lambda m: generate(m, padded_prompt(), 3.0), TypeError, "max_new_tokens must be an int, got float"),
    ("beam: max_new_tokens bool", lambda m: beam_search(m, padded_prompt(), False), TypeError,
     "max_new_tokens must be an int, got bool"),
    ("prompt of bools", lambda m: generate(m, padded_prompt() > 0, 3), TypeError,
     "prompt must hold integer token ids, got dtype torch.bool (expected torch.long or torch.int32)"),
    ("prompt of floats", lambda m: generate(m, padded_prompt().float(), 3), ValueError,
     "prompt must be a non-empty (B, P) tensor of token ids, got torch.float32 (2, 5)"),
    ("prompt a list", lambda m: generate(m, [[1, 5, 6]], 3), TypeError, "prompt must be a torch.Tensor, got list"),
    ("prompt 1-D", lambda m: generate(m, torch.tensor([1, 5, 6]), 3), ValueError, "prompt must have 2 dimensions, got 1"),
    ("prompt empty", lambda m: generate(m, torch.zeros(1, 0, dtype=torch.long), 3), ValueError,
     "prompt must be a non-empty (B, P) tensor of token ids, got torch.int64 (1, 0)"),
    ("use_cache a str", lambda m: generate(m, padded_prompt(), 3, use_cache="yes"), TypeError,
     "use_cache must be a bool, got str ('yes')"),
    ("return_logits an int", lambda m: generate(m, padded_prompt(), 3, return_logits=1), TypeError,
     "return_logits must be a bool, got int (1)"),
    ("beam: use_cache an int", lambda m: beam_search(m, padded_prompt(), 3, use_cache=0), TypeError,
     "use_cache must be a bool, got int (0)"),
    ("do_sample an int", lambda m: generate(m, padded_prompt(), 3, do_sample=1), TypeError, "do_sample must be a bool, got int"),
    ("generator an int", lambda m: generate(m, padded_prompt(), 3, generator=0), TypeError,
     "generator must be a torch.Generator (e.g. torch.Generator().manual_seed(0)) or None, got int"),
    ("eos_id a float", lambda m: generate(m, padded_prompt(), 3, eos_id=2.0), TypeError, "eos_id must be an int, got float"),
    ("pad_id a bool", lambda m: generate(m, padded_prompt(), 3, pad_id=False), TypeError, "pad_id must be an int, got bool"),
    ("cache_cls a str", lambda m: generate(m, padded_prompt(), 3, cache_cls="KVCache"), TypeError,
     "cache_cls must be a cache class, KVCache or ConcatKVCache (not an instance), got 'KVCache'"),
    ("beam: cache_cls not a cache", lambda m: beam_search(m, padded_prompt(), 3, cache_cls=dict), TypeError,
     "cache_cls must be a cache class, KVCache or ConcatKVCache (not an instance), got <class 'dict'>"),
    ("clock an int", lambda m: generate(m, padded_prompt(), 3, clock=3), TypeError,
     "clock must be a function returning seconds (e.g. time.perf_counter), got int"),
    ("prompt on another device", lambda m: generate(m, padded_prompt().to("meta"), 3), ValueError,
     "prompt is on meta, the model on cpu; move one with .to(device)"),
    ("src on a decoder-only model", lambda m: generate(m, padded_prompt(), 3, src=torch.tensor([[1, 2]] * 2)),
     ValueError, "a DecoderOnlyLM has no encoder; do not pass src"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_bad_input_gets_a_named_error(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call(lm())


def test_a_masked_token_between_real_ones_is_hidden_not_refused():
    """Chapter 13's use: prompt_mask hides a token inside the prompt (what transformers does for a pad id in the
    prompt); only a row that ends in padding is refused."""
    model = lm(pad_id=None)
    prompt = torch.tensor([[5, PAD, 7, 3, 6]])
    hidden = generate(model, prompt, 4, eos_id=-1, prompt_mask=prompt != PAD, return_logits=True)
    uncached = generate(model, prompt, 4, eos_id=-1, prompt_mask=prompt != PAD, return_logits=True, use_cache=False)
    assert torch.equal(hidden.tokens, uncached.tokens)
    torch.testing.assert_close(hidden.logits, uncached.logits, atol=1e-5, rtol=1e-5)


def test_generate_keeps_only_the_window_of_a_sliding_window_layer(monkeypatch):
    """generate's default cache gives each windowed layer a SlidingKVCache (W positions, however long the text), and
    the tokens equal the uncached recompute; ConcatKVCache, asked for by name, is left as asked."""
    from minitfm.layers import kv_cache

    made = []
    original = kv_cache.SlidingKVCache.__init__

    def spy(self, *args, **kwargs):
        made.append(kwargs["window"])
        original(self, *args, **kwargs)

    monkeypatch.setattr(kv_cache.SlidingKVCache, "__init__", spy)
    torch.manual_seed(0)
    config = ModelConfig.small_lm(vocab_size=41, d_model=32, n_layers=3, max_seq_len=64, sliding_window=5,
                                          sliding_layers=(0, 2))
    model = DecoderOnlyLM(config).eval()
    prompt = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6], [0, 0, 0, 7, 3, 8, 4, 6]])
    fast = generate(model, prompt, 30, eos_id=-1, pad_id=0)
    assert made == [5, 5]  # the two windowed layers, and only those
    slow = generate(model, prompt, 30, eos_id=-1, pad_id=0, use_cache=False)
    assert torch.equal(fast.tokens, slow.tokens)
    made.clear()
    concat = generate(model, prompt, 30, eos_id=-1, pad_id=0, cache_cls=ConcatKVCache)
    assert made == [] and torch.equal(concat.tokens, slow.tokens)
