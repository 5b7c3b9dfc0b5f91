"""Chapter 15's diagrams: drawn from the data they are given, with the words the chapter uses."""
import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from minitfm.finetuning import CHAT_SPECIAL_TOKENS, ChatTemplate  # noqa: E402
from minitfm.text.words import WordTokenizer  # noqa: E402
from minitfm.viz.finetuning_diagrams import chat_template_diagram, lora_diagram  # noqa: E402


def texts(fig):
    return " ".join(t.get_text() for ax in fig.axes for t in ax.texts)


def test_the_lora_diagram_names_its_parts():
    fig = lora_diagram()
    words = texts(fig)
    for label in ["W (D_out, D_in)", "frozen", "A (r, D_in)", "B (D_out, r)", "zero at start", "alpha / r", "merge"]:
        assert label in words, label
    plt.close(fig)


def test_the_chat_diagram_draws_the_rendered_tokens_and_labels():
    tok = WordTokenizer("what is two plus three five".split() + list(CHAT_SPECIAL_TOKENS))
    chat = ChatTemplate(tok).render([{"role": "user", "content": "what is two plus three"},
                                     {"role": "assistant", "content": "five"}])
    tokens = [tok.itos[i] for i in chat.ids.tolist()]
    roles = [next(s.role for s in chat.spans if s.start <= j < s.stop) for j in range(len(tokens))]
    fig = chat_template_diagram(tokens, roles, chat.labels.tolist())
    words = texts(fig).split()
    assert words.count("-100") == int((chat.labels == -100).sum())
    assert str(tok.stoi["five"]) in words and "<|assistant|>" in words
    plt.close(fig)
    with pytest.raises(ValueError, match="one entry per token"):
        chat_template_diagram(tokens, roles[:-1], chat.labels.tolist())
