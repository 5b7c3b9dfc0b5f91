import json
from pathlib import Path

import pytest
import torch

from minitfm.viz import scale_explorer
from minitfm.viz import static_explorers as se
from minitfm.viz.explorer_data import example_logits
from site_browser import browser_unavailable, launch

# Playwright driving the system Chromium ($CHROMIUM, else chromium / google-chrome on PATH), as in the site test
BROWSER_MISSING = browser_unavailable()


def _weights():
    torch.manual_seed(0)
    return {"encoder_self": [torch.rand(2, 2, 3, 3).softmax(-1) for _ in range(2)],
            "decoder_self": [torch.rand(2, 2, 4, 4).softmax(-1) for _ in range(2)],
            "cross": [torch.rand(2, 2, 4, 3).softmax(-1) for _ in range(2)]}


def _all_explorers():
    return [se.static_attention_explorer(_weights(), ["<bos>", "le", "chat", "noir"], ["the", "black", "cat"]),
            se.static_scaling_explorer(d_k_values=(1, 4, 16, 64, 256)),
            se.static_mask_explorer(),
            se.static_positional_explorer(max_len=10, d_model=8),
            se.static_sampling_explorer(temperatures=(0.5, 1.0), top_ks=(0, 2), top_ps=(1.0, 0.5),
                                        penalties=(1.0, 2.0)),
            scale_explorer.static_scale_explorer(device_counts=(1, 8, 64), seq_lens=(4096, 8192))]


def test_html_has_no_external_url_even_with_url_like_labels():
    tricky = se.static_attention_explorer([torch.rand(1, 1, 2, 2).softmax(-1)], ["http://x.org", "</script>"])
    for explorer in _all_explorers() + [tricky]:
        assert "http://" not in explorer.html and "https://" not in explorer.html
        assert "xmlns" not in explorer.html
        assert explorer.html.count("</script>") == 2  # only the data block and the engine close a script
        assert len(explorer.html) < 1_000_000
    assert se.decode_spec(tricky.html)["labels"]["rows_self"] == ["http://x.org", "</script>"]


def test_root_and_readout_hooks_and_unique_ids():
    explorers = _all_explorers() + [se.static_mask_explorer()]
    ids = [e.element_id for e in explorers]
    assert len(set(ids)) == len(ids)
    for explorer in explorers:
        assert f'data-minitfm-explorer="{explorer.name}"' in explorer.html
        assert "data-minitfm-readout" in explorer.html
    assert se.static_mask_explorer().element_id.split("-")[2] == explorers[2].element_id.split("-")[2]  # same data, same hash


def test_attention_data_decodes_back_to_the_input_tensors():
    weights = _weights()
    spec = se.decode_spec(se.static_attention_explorer(weights, list("abcd"), list("xyz"), batch_index=1).html)
    for kind, layers in weights.items():
        expected = torch.stack([w[1] for w in layers])  # (L, H, T_q, T_k) of batch item 1
        assert torch.equal(spec["arrays"][f"w_{kind}"], torch.round(expected, decimals=se.DECIMALS))
        torch.testing.assert_close(spec["arrays"][f"w_{kind}"], expected, atol=0.5 * 10 ** -se.DECIMALS, rtol=0)
    assert spec["labels"]["rows_cross"] == list("abcd") and spec["labels"]["cols_cross"] == list("xyz")
    assert spec["labels"]["rows_encoder_self"] == list("xyz")


def test_parameter_explorers_embed_what_the_library_computes():
    from minitfm.viz.explorer_data import mask_data, positional_table, sampling_data, scaling_data

    scaling = se.decode_spec(se.static_scaling_explorer(d_k_values=(4, 64)).html)["arrays"]
    rounded = lambda t: torch.round(t.float(), decimals=se.DECIMALS)  # noqa: E731  (what the page embeds)
    assert torch.equal(scaling["weights"][1, 0], rounded(scaling_data(4, False)["weights"]))  # [unscaled, d_k=4]
    masks = se.decode_spec(se.static_mask_explorer().html)["arrays"]
    tokens = torch.tensor([[3, 4, 0], [5, 6, 7]])
    masks = se.decode_spec(se.static_mask_explorer(tokens, [["a", "b", "<pad>"], ["c", "d", "e"]]).html)["arrays"]
    assert torch.equal(masks["mask"][0], mask_data(tokens, 0, "padding")["mask"].float())
    positional = se.decode_spec(se.static_positional_explorer(max_len=6, d_model=4).html)["arrays"]
    assert torch.equal(positional["table"][2], rounded(positional_table("rope", 6, 4)))
    logits, labels, history = example_logits()
    spec = se.decode_spec(se.static_sampling_explorer(temperatures=(0.7,), top_ks=(0, 3), top_ps=(0.9,),
                                                      penalties=(1.2,)).html)
    order = logits.argsort(descending=True, stable=True)
    expected = sampling_data(logits, history, 0.7, 3, 0.9, 1.2)["after"][order]
    torch.testing.assert_close(spec["arrays"]["after"][0, 1, 0, 0], expected, atol=0.5 * 10 ** -se.DECIMALS, rtol=0)
    assert spec["readouts"][0]["texts"][1].startswith("kept 3 of 16")


def _readout(spec, number, **state):
    """The readout text the engine shows for ``state`` (control key -> option index; the rest at 0)."""
    readout, options = spec["readouts"][number], {c["key"]: len(c["options"]) for c in spec["controls"]}
    flat = 0
    for key in readout["by"]:
        flat = flat * options[key] + state.get(key, 0)
    return readout["texts"][flat]


def test_scale_explorer_embeds_what_minitfm_scale_computes():
    from minitfm.training.scale import GB, STRATEGIES, training_memory_per_device, training_shape

    devices, seq_lens = (1, 8, 64), (1024, 4096)
    explorer = scale_explorer.static_scale_explorer(device_counts=devices, seq_lens=seq_lens, micro_batches=(1, 2))
    spec = se.decode_spec(explorer.html)
    arrays, llama = spec["arrays"], training_shape("Llama-2-7B")
    assert [c["options"] for c in spec["controls"]][0] == ["the book's small LM", "Llama-2-7B", "Llama-2-70B"]
    def close(got, want):  # GB rounded to DECIMALS, then stored as float32 (7 significant digits)
        return abs(float(got) - want / GB) <= 0.5 * 10 ** -se.DECIMALS + 1e-6 * want / GB
    for st, strategy in enumerate(STRATEGIES):
        for d, n in enumerate(devices):
            if strategy == "tp" and n == 64:  # 32 heads do not split 64 ways: no data, and the readout says why
                assert torch.isnan(arrays["states"][1, st, :, d]).all()
                assert torch.isnan(arrays["total"][1, :, :, :, st, d]).all()
                assert "impossible, Llama-2-7B has 32 heads" in _readout(spec, 0, model=1, strategy=st, devices=d)
                continue
            states = training_memory_per_device(llama, strategy=strategy, n_devices=n)
            assert close(arrays["states"][1, st, 0, d], states.weights)  # cumulative: weights, + grads, + Adam
            assert close(arrays["states"][1, st, 2, d], states.model_states)
            assert close(arrays["bar_states"][1, d, 1, st], states.gradients)
            flash = training_memory_per_device(llama, strategy=strategy, n_devices=n, seq_len=4096, micro_batch=2,
                                               flash_attention=True, dropout=False)  # Llama trains without dropout
            assert close(arrays["total"][1, 2, 1, 1, st, d], flash.total)  # [model, act, seq, batch, strategy, N]
            assert close(arrays["bar_acts"][1, 2, 1, 1, d, st], flash.activations)
            assert close(arrays["total"][1, 0, 1, 1, st, d], states.total)  # activations "not counted"
    zero3 = _readout(spec, 0, model=1, strategy=3, devices=2)
    assert zero3 == "ZeRO-3 on 64 devices: weights 0.2, gradients 0.2, Adam 1.3 GB"
    stored = training_memory_per_device(llama, strategy="zero3", n_devices=64, seq_len=4096, micro_batch=2,
                                        dropout=False)
    assert _readout(spec, 1, model=1, strategy=3, devices=2, act=1, seq=1, batch=1) == \
        f"activations {stored.activations / GB:.1f} GB, {stored.total / GB:.1f} GB per device: over 80 GB"
    assert _readout(spec, 1, model=1, strategy=3, devices=2, act=2, seq=0).endswith("per device: fits in 80 GB")
    assert torch.isnan(arrays["capacity"][0]).all() and (arrays["capacity"][1] == 80).all()  # small LM: off scale
    # dropout=True counts Korthikanti et al.'s GPT block (dropout masks and output) instead
    gpt = se.decode_spec(scale_explorer.static_scale_explorer([llama], device_counts=(8,), seq_lens=(4096,), dropout=True).html)
    with_dropout = training_memory_per_device(llama, strategy="zero3", n_devices=8, seq_len=4096)
    without = training_memory_per_device(llama, strategy="zero3", n_devices=8, seq_len=4096, dropout=False)
    assert close(gpt["arrays"]["total"][0, 1, 0, 0, 3, 0], with_dropout.total)
    assert close(arrays["total"][1, 1, 1, 0, 3, 1], without.total) and without.total < with_dropout.total
    assert "no dropout" in spec["hint"] and "with dropout" in gpt["hint"]


def test_bad_input_gives_clear_errors():
    with pytest.raises(ValueError, match="has 2 labels but the tensor has 4"):
        se.static_attention_explorer(_weights(), ["a", "b"], list("xyz"))
    with pytest.raises(ValueError, match="NaN/Inf"):
        se.static_attention_explorer([torch.tensor([[[[float("nan")]]]])])
    with pytest.raises(ValueError, match="empty"):
        se.static_attention_explorer([torch.rand(1, 1, 2, 0)])
    with pytest.raises(ValueError, match="labels has 1 sequences but tokens has B = 2"):
        se.static_mask_explorer(torch.tensor([[1, 0], [1, 1]]), [["a", "<pad>"]])
    with pytest.raises(TypeError, match="models must be a non-empty list of minitfm.training.scale.TrainingShape"):
        scale_explorer.static_scale_explorer(["Llama-2-7B"])
    with pytest.raises(ValueError, match="seq_lens must not be empty"):
        scale_explorer.static_scale_explorer(seq_lens=())
    with pytest.raises(TypeError, match="dropout must be a bool, got float"):
        scale_explorer.static_scale_explorer(dropout=0.1)
    with pytest.raises(ValueError, match="no minitfm explorer data"):
        se.decode_spec("<div></div>")


def test_save_writes_a_standalone_page(tmp_path):
    path = se.static_mask_explorer().save(tmp_path / "masks.html")
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and 'data-minitfm-explorer="masks"' in page
    assert "http://" not in page and "https://" not in page


# ---- the browser test: load the HTML in headless Chromium, move a control, watch the page change ----

DRIVER = """<pre id="minitfm-test-result">pending</pre><script>
window.addEventListener("load", function () {
  var out = [];
  function picture(root) {
    return Array.prototype.map.call(root.querySelectorAll("canvas"), function (c) { return c.toDataURL(); }).join("|");
  }
  document.querySelectorAll("[data-minitfm-explorer]").forEach(function (root) {
    var readout = root.querySelector("[data-minitfm-readout]"), before = readout.textContent, pic = picture(root);
    var controls = root.querySelectorAll("[data-minitfm-control]"), control = controls[controls.length - 1];
    control.value = control.tagName === "SELECT" ? String(control.options.length - 1) : control.max;
    control.dispatchEvent(new Event("input", {bubbles: true}));
    out.push({name: root.getAttribute("data-minitfm-explorer"), id: root.id, before: before,
              after: readout.textContent, canvases: root.querySelectorAll("canvas").length,
              pictureChanged: picture(root) !== pic, control: control.getAttribute("data-minitfm-control")});
  });
  document.getElementById("minitfm-test-result").textContent = JSON.stringify(out);
});
</script>"""


def _run_chromium(page: Path) -> str:
    """Open ``page`` in headless Chromium and return the DRIVER's result block (JSON text)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            tab = browser.new_page(viewport={"width": 900, "height": 2000})
            tab.goto(page.as_uri(), wait_until="load")
            tab.wait_for_function("document.getElementById('minitfm-test-result').textContent !== 'pending'",
                                  timeout=60_000)
            return tab.text_content("#minitfm-test-result")
        finally:
            browser.close()


@pytest.mark.skipif(BROWSER_MISSING is not None, reason=BROWSER_MISSING or "")
def test_explorers_respond_to_controls_in_headless_chromium(tmp_path):
    explorers = _all_explorers() + [se.static_attention_explorer(_weights(), list("abcd"), list("xyz"))]
    page = tmp_path / "page.html"
    page.write_text('<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>'
                    + "".join(e.html for e in explorers) + DRIVER + "</body></html>", encoding="utf-8")
    results = json.loads(_run_chromium(page))
    assert [r["name"] for r in results] == [e.name for e in explorers]
    assert len({r["id"] for r in results}) == len(results)  # two attention explorers, no clash
    expected_views = {"attention": 1, "scaling": 3, "masks": 2, "positional": 3, "sampling": 1, "scale": 2}
    for r in results:
        assert r["canvases"] == expected_views[r["name"]], r
        assert r["before"] != r["after"], r  # the readout follows the control
        assert r["pictureChanged"], r  # and so does the drawing
    assert results[0]["after"].startswith("encoder self-attention · layer 0 · head 1")


def test_embedded_data_is_rounded_so_float_noise_leaves_the_bytes_alone():
    x = torch.tensor([[0.12341, 0.5, -0.25], [1e-9, -1e-9, 0.99996]])
    noisy = x + torch.tensor([[3e-7, -2e-7, 1e-7], [2e-9, 1e-9, -1e-7]])  # the size of a change of CPU or thread count
    assert se.encode_array(x)["b64"] == se.encode_array(noisy)["b64"]
    assert se.decode_array(se.encode_array(x)).tolist() == torch.tensor([[0.1234, 0.5, -0.25], [0.0, 0.0, 1.0]]).tolist()
