"""A word-level tokenizer and a tiny random Llama configuration: the shared fixture of the TRL reference tests
(tests/preferences), so that DPO and GRPO are checked on the same kind of checkpoint."""
from __future__ import annotations

WORDS = "<pad> <eos> <bos> what is one two three four five plus and the answer yes no maybe".split()


def tokenizer():
    """A ``PreTrainedTokenizerFast`` over WORDS, one id per word, split on spaces."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="maybe"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>",
                                                bos_token="<bos>")


def llama_config():
    """Two layers of width 32, grouped-query heads 4/2, untied head, large initial weights (log-ratios far
    from 0)."""
    import transformers

    return transformers.LlamaConfig(vocab_size=len(WORDS), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                    pad_token_id=0, eos_token_id=1, bos_token_id=2, tie_word_embeddings=False,
                                    initializer_range=0.3)
