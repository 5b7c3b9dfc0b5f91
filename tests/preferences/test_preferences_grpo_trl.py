"""minitfm's GRPO equals Hugging Face TRL's ``GRPOTrainer`` (the version pinned in requirements.txt).

- **Loss** (public API): a tiny random Llama checkpoint, saved to tmp_path, is both TRL's model (by path, as TRL
  wants it when it builds a reference) and minitfm's (``minitfm.pretrained.load``). On identical inputs (prompts,
  completions of varied lengths, old and reference log-probabilities that differ from the policy's, so that the
  clip and the KL both act, advantages) TRL's public ``compute_loss`` and ``minitfm.preferences.grpo_loss`` on
  minitfm's own per-token log-probabilities agree to 1e-6, for the four loss types, with and without the KL
  term, at a sampling temperature of 0.7, and with TRL's ``use_bias_correction_kl`` on and off.
- **Advantages**: TRL computes them nowhere but inside its *private* ``_generate_and_score_completions``
  (trl 1.16.0, ``trl/trainer/grpo_trainer.py``, lines 2760-2788: r minus the group's nanmean, divided by
  ``nanstd`` + 1e-4), so this test calls that private method, the smallest way to TRL's own numbers: TRL samples
  completions, a reward function hands it recorded rewards, and its advantages equal ``group_advantages`` for
  ``scale_rewards`` = group, batch and none. A TRL upgrade may rename it; the pin in requirements.txt holds it.

TRL's configs default to bf16 even on a CPU (``bf16=False`` here); the trainer is in eval mode, where ``dapo``
divides by ``num_items_in_batch`` alone (in train mode gradient accumulation enters too).
"""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("trl")
transformers = pytest.importorskip("transformers")
datasets = pytest.importorskip("datasets")

from minitfm.pretrained import load  # noqa: E402
from tiny_word_llama import WORDS, llama_config, tokenizer  # noqa: E402
from minitfm.preferences.grpo import completion_log_probs, group_advantages, grpo_loss  # noqa: E402

PROMPTS = ["what is one plus two", "what is two plus two"]  # equal lengths: no prompt padding
G, C, TEMPERATURE = 4, 6, 0.7



@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("grpo_llama") / "policy"
    config = llama_config()
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(path)
    tokenizer().save_pretrained(path)
    return path


RECORDED = []  # the rewards the next call of the reward function returns


def recorded_reward(prompts, completions, **kwargs):
    return RECORDED.pop(0)


def trainer_for(path, tmp_path, **overrides):
    from trl import GRPOConfig, GRPOTrainer

    settings = dict(output_dir=str(tmp_path / "out"), num_generations=G, per_device_train_batch_size=G * len(PROMPTS),
                    max_completion_length=C, temperature=TEMPERATURE, use_cpu=True, bf16=False, report_to=[],
                    model_init_kwargs={"dtype": torch.float64})
    args = GRPOConfig(**{**settings, **overrides})
    trainer = GRPOTrainer(model=str(path), reward_funcs=recorded_reward, args=args,
                          train_dataset=datasets.Dataset.from_dict({"prompt": PROMPTS}), processing_class=tokenizer())
    trainer.model.eval()
    return trainer


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_advantages_equal_trl(checkpoint, tmp_path, scale):
    trainer = trainer_for(checkpoint, tmp_path, scale_rewards=scale)
    rewards = torch.tensor([[1.0, 0.0, 1.0, 1.0], [0.2, 0.5, 0.0, 0.4]], dtype=torch.float64)  # (N, G)
    RECORDED.append(rewards.flatten().tolist())
    with torch.no_grad():
        out = trainer._generate_and_score_completions([{"prompt": p} for p in PROMPTS for _ in range(G)])
    ours = group_advantages(rewards, scale=scale).flatten()
    difference = float((ours - out["advantages"].double()).abs().max())
    print(f"scale={scale}: advantages {ours.tolist()}, largest difference {difference:.1e}")
    assert difference <= 1e-6


def identical_inputs(path):
    """What TRL's compute_loss reads, and minitfm's per-token log-probabilities of the same completions."""
    tok = tokenizer()
    prompt = torch.tensor([tok(p)["input_ids"] for p in PROMPTS for _ in range(G)])  # (B, P)
    generator = torch.Generator().manual_seed(3)
    completion = torch.randint(3, len(WORDS), (len(prompt), C), generator=generator)  # (B, C)
    lengths = torch.tensor([6, 2, 5, 1, 3, 6, 4, 2])
    mask = (torch.arange(C)[None, :] < lengths[:, None]).long()  # varied lengths: the normalisations differ
    model = load(path, dtype=torch.float64)
    with torch.no_grad():
        log_probs = completion_log_probs(model, prompt, completion, temperature=TEMPERATURE)  # (B, C)
    old = log_probs + 0.3 * torch.randn(log_probs.shape, generator=generator, dtype=torch.float64)  # ratios != 1
    ref = log_probs + 0.5 * torch.randn(log_probs.shape, generator=generator, dtype=torch.float64)
    advantages = torch.randn(len(prompt), generator=generator, dtype=torch.float64)
    inputs = {"prompt_ids": prompt, "prompt_mask": torch.ones_like(prompt), "completion_ids": completion,
              "completion_mask": mask, "advantages": advantages, "old_per_token_logps": old,
              "ref_per_token_logps": ref,
              "num_items_in_batch": mask.sum() + 17}  # dapo: the whole generation batch's tokens, more than these
    return inputs, log_probs


CASES = [(loss_type, beta, True) for loss_type in ("grpo", "bnpo", "dr_grpo", "dapo") for beta in (0.0, 0.04)]
CASES.append(("grpo", 0.04, False))  # the KL as the DeepSeekMath paper writes it, without TRL's ratio


@pytest.mark.parametrize("loss_type,beta,kl_ratio", CASES)
def test_loss_equals_trl(checkpoint, tmp_path, loss_type, beta, kl_ratio):
    trainer = trainer_for(checkpoint, tmp_path, loss_type=loss_type, beta=beta, use_bias_correction_kl=kl_ratio)
    inputs, log_probs = identical_inputs(checkpoint)
    with torch.no_grad():
        theirs = float(trainer.compute_loss(trainer.model, dict(inputs)))
    out = grpo_loss(log_probs, inputs["old_per_token_logps"], inputs["advantages"], inputs["completion_mask"],
                    loss_type=loss_type, beta=beta, ref_log_probs=inputs["ref_per_token_logps"], kl_ratio=kl_ratio,
                    max_length=C, num_tokens=int(inputs["num_items_in_batch"]))
    difference = abs(float(out.loss) - theirs)
    print(f"{loss_type} beta={beta} kl_ratio={kl_ratio}: loss {float(out.loss):.6f}, clipped {out.clip_fraction:.2f}, "
          f"difference {difference:.1e}")
    assert difference <= 1e-6
    assert out.clip_fraction > 0  # the inputs exercise the clip
