"""minitfm's DPO equals Hugging Face TRL's ``DPOTrainer`` (the version pinned in requirements.txt), end to end.

One tiny random Llama checkpoint (built offline with transformers' ``LlamaConfig``, saved to tmp_path) is the
policy and another the reference. TRL tokenizes the preference pairs (appending EOS to each reply), batches them
``[chosen; rejected]`` and computes its loss and metrics through its public ``compute_loss``; minitfm loads the
same checkpoints (``minitfm.pretrained.load``) and scores the same ids, with labels -100 outside the replies
(chapter 15's mask). TRL's numbers come through public methods only: ``compute_loss`` for the loss, then
``log``, whose record in ``trainer.state.log_history`` holds the metrics ``compute_loss`` measured. The loss, the mean chosen and rejected rewards, the margins, the accuracy and the mean
chosen and rejected log-probabilities agree to 1e-6.

TRL's configs default to bf16 even on a CPU (``bf16=False`` here), and each trainer patches the model it gets,
so every trainer gets freshly loaded models.
"""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("trl")
transformers = pytest.importorskip("transformers")
datasets = pytest.importorskip("datasets")

from minitfm.finetuning.chat import IGNORE_INDEX, RenderedChat  # noqa: E402
from minitfm.pretrained import load  # noqa: E402
from tiny_word_llama import llama_config, tokenizer  # noqa: E402
from minitfm.preferences.dpo import dpo_batch_loss  # noqa: E402

PAIRS = {"prompt": ["what is one plus two", "what is two plus two and", "the answer is", "what is five"],
         "chosen": [" three", " four yes", " yes", " five"],
         "rejected": [" four five", " five", " no no maybe", " the answer"]}



@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("dpo_llama")
    config = llama_config()
    for seed, name in ((0, "policy"), (1, "reference")):
        torch.manual_seed(seed)
        transformers.LlamaForCausalLM(config).save_pretrained(root / name)
    return root


def trl_numbers(root, beta: float, tmp_path):
    from trl import DPOConfig, DPOTrainer

    def fresh(name):
        return transformers.LlamaForCausalLM.from_pretrained(root / name, dtype=torch.float64)

    args = DPOConfig(output_dir=str(tmp_path / "out"), beta=beta, use_cpu=True, bf16=False, report_to=[],
                     per_device_train_batch_size=len(PAIRS["prompt"]))
    trainer = DPOTrainer(model=fresh("policy"), ref_model=fresh("reference"), args=args,
                         train_dataset=datasets.Dataset.from_dict(PAIRS), processing_class=tokenizer())
    batch = next(iter(trainer.get_train_dataloader()))
    trainer.model.eval()
    with torch.no_grad():
        loss = trainer.compute_loss(trainer.model, batch)
    trainer.log({})  # the public way to read the metrics compute_loss recorded: the trainer's log of this batch
    logged = trainer.state.log_history[-1]
    metrics = {k.removeprefix("eval_"): v for k, v in logged.items() if k.startswith("eval_")}  # eval mode
    return batch, float(loss), metrics


def as_chats(batch) -> list[RenderedChat]:
    """TRL's rows (right-padded, completion_mask 1 on each reply and its EOS) as chapter 15's rendered chats."""
    chats = []
    for ids, real, reply in zip(batch["input_ids"], batch["attention_mask"], batch["completion_mask"]):
        n = int(real.sum())
        labels = torch.where(reply[:n].bool(), ids[:n], torch.full_like(ids[:n], IGNORE_INDEX))
        chats.append(RenderedChat(ids[:n].clone(), labels, []))
    return chats


@pytest.mark.parametrize("beta", [0.1, 0.5])
def test_dpo_equals_trl_dpo_trainer(checkpoints, tmp_path, beta):
    batch, trl_loss, metrics = trl_numbers(checkpoints, beta, tmp_path)
    chats = as_chats(batch)
    n = len(chats) // 2  # [chosen; rejected]
    policy = load(checkpoints / "policy", dtype=torch.float64)
    reference = load(checkpoints / "reference", dtype=torch.float64)
    with torch.no_grad():
        out = dpo_batch_loss(policy, reference, chats[:n], chats[n:], beta=beta)
    ours = {"loss": float(out.loss), "rewards/chosen": float(out.chosen_rewards.mean()),
            "rewards/rejected": float(out.rejected_rewards.mean()), "rewards/margins": float(out.margins.mean()),
            "rewards/accuracies": out.accuracy, "logps/chosen": float(out.chosen_log_probs.mean()),
            "logps/rejected": float(out.rejected_log_probs.mean())}
    theirs = {"loss": trl_loss, **{k: metrics[k] for k in ours if k != "loss"}}
    diffs = {k: abs(ours[k] - theirs[k]) for k in ours}
    print(f"beta={beta}: " + ", ".join(f"{k} {d:.1e}" for k, d in diffs.items()))
    # TRL scores in float32 whatever the model's dtype (its fused LM head), minitfm in float64 here: the loss
    # and the rewards (log-probabilities of about -10, differenced and times beta) agree to 1e-6; the raw sums
    # of log-probabilities, one float32 rounding of -10 being ~1e-6, to 1e-6 relative
    assert max(diffs[k] for k in ("loss", "rewards/chosen", "rewards/rejected", "rewards/margins",
                                  "rewards/accuracies")) <= 1e-6, (ours, theirs)
    for k in ("logps/chosen", "logps/rejected"):
        assert diffs[k] <= 1e-6 * abs(theirs[k]), (k, ours[k], theirs[k])
    assert abs(ours["rewards/margins"]) > 1e-2  # a test of something: the two models really differ
    assert ours["loss"] != pytest.approx(0.6931471805599453, abs=1e-3)
