"""Kernel-free explorers: self-contained HTML + JavaScript that work where no Python runs.

The same five explorers as ``minitfm.viz.explorers``, for the static book page, Jupyter, Colab and VS Code
outputs, and offline: every number is computed here in Python and embedded in the page (base64
float32 arrays in a JSON block); the browser only switches between precomputed settings and draws on
a ``<canvas>``. The HTML references no external URL at all (no CDN, no ``http``).

Each builder returns a ``StaticExplorer`` (``.html``, ``_repr_html_`` for notebooks, ``.save(path)``).
Hooks for browser tests: the root element carries ``data-minitfm-explorer="<name>"``, the one-line
summary ``data-minitfm-readout``, each control ``data-minitfm-control="<key>"``.

Glossary: B batch, H heads, L layers, T_q/T_k queries/keys, T positions, D d_model, V vocabulary.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import html as html_lib
import itertools
import json
import re
import warnings
from importlib import resources
from pathlib import Path

import matplotlib
import numpy as np
import torch

from minitfm._checks import check_positive_int
from minitfm.viz import explorer_data as xd

MAX_BYTES = 1_000_000
_instances = itertools.count()  # ids from a counter and a hash, never random: notebook outputs stay stable
_DATA_RE = re.compile(r'<script type="application/json" data-minitfm-data>(.*?)</script>', re.S)


DECIMALS = 4  # the page shows at most 3 decimals; rounding keeps float noise (CPU, threads) out of most bytes


def encode_array(x: torch.Tensor, decimals: int = DECIMALS) -> dict:
    """A tensor as ``{"shape": [...], "b64": little-endian float32 bytes in base64}``, rounded to ``decimals``.

    Rounding makes the embedded bytes the same on machines whose last float bits differ, except for a value
    that sits on a rounding boundary; nbval normalises the data block for that case (tests/nbval_sanitize.cfg).
    """
    rounded = torch.round(x.detach().cpu().float(), decimals=decimals) + 0.0  # + 0.0 turns -0.0 into 0.0
    data = np.ascontiguousarray(rounded.numpy(), dtype="<f4")
    return {"shape": list(x.shape), "b64": base64.b64encode(data.tobytes()).decode("ascii")}


def decode_array(entry: dict) -> torch.Tensor:
    raw = np.frombuffer(base64.b64decode(entry["b64"]), dtype="<f4").copy()
    return torch.from_numpy(raw).reshape(entry["shape"])


def decode_spec(html: str) -> dict:
    """The JSON spec embedded in an explorer's HTML, with its arrays decoded back to tensors."""
    match = _DATA_RE.search(html)
    if match is None:
        raise ValueError("no minitfm explorer data block found in this HTML")
    spec = json.loads(match.group(1))
    spec["arrays"] = {name: decode_array(entry) for name, entry in spec["arrays"].items()}
    return spec


@functools.lru_cache(maxsize=None)
def _engine_js() -> str:
    """The browser engine, ``explorer_engine.js`` (package data), as pages embed it inline.

    Its leading ``//`` comment lines (the file's description) are dropped; what remains, from the
    blank line before the code on, is the exact text that committed notebook outputs embed.
    """
    text = resources.files(__package__).joinpath("explorer_engine.js").read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    while lines and lines[0].startswith("//"):
        lines.pop(0)
    return "".join(lines)


def _viridis() -> str:
    stops = matplotlib.colormaps["viridis"](np.linspace(0, 1, 17))[:, :3]
    return json.dumps([[int(round(v * 255)) for v in rgb] for rgb in stops])


def _text_for_html(text: str) -> str:
    return html_lib.escape(text).replace("/", "&#47;")  # "&#47;" shows "/" but no "http://" appears in the source


def _json_for_html(obj) -> str:
    # "\/" is JSON's own escape for "/": no "</script>" and no "http://" can appear, whatever the labels say.
    text = json.dumps(obj, ensure_ascii=True, separators=(",", ":"))
    return text.replace("/", "\\/").replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


class StaticExplorer:
    """One kernel-free explorer: ``name`` and the JSON-able ``spec`` the browser engine draws."""

    def __init__(self, name: str, title: str, spec: dict):
        self.name, self.title = name, title
        self.spec = {k: ({n: encode_array(a) for n, a in v.items()} if k == "arrays" else v) for k, v in spec.items()}
        payload = _json_for_html(self.spec)
        digest = hashlib.sha1(payload.encode()).hexdigest()[:8]
        self.element_id = f"minitfm-{name}-{digest}-{next(_instances)}"
        self.html = self._render(payload)
        if len(self.html) > MAX_BYTES:
            warnings.warn(f"the {name} explorer is {len(self.html) / 1e6:.1f} MB of HTML; use fewer settings "
                          "or smaller tensors to keep pages light", stacklevel=3)

    def _render(self, payload: str) -> str:
        i = self.element_id
        box = ("background:#fff;color:#1f2328;border:1px solid #d0d7de;border-radius:6px;padding:10px 12px;"
               "margin:8px 0;max-width:100%;box-sizing:border-box;"
               "font:13px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'Noto Sans','PingFang SC',sans-serif")
        first = " · ".join(r if isinstance(r, str) else r["texts"][0] for r in self.spec.get("readouts", []))
        script = _engine_js().replace("__ROOT_ID__", i).replace("__VIRIDIS__", _viridis())
        return (
            f'<div id="{i}" class="minitfm-explorer" data-minitfm-explorer="{self.name}" style="{box}">'
            f'<div style="font-weight:600;font-size:14px;margin-bottom:4px">{_text_for_html(self.title)}</div>'
            f'<div id="{i}-controls" data-minitfm-controls style="display:flex;flex-wrap:wrap"></div>'
            f'<div id="{i}-readout" data-minitfm-readout aria-live="polite" '
            f'style="margin:6px 0 2px;font-variant-numeric:tabular-nums">{_text_for_html(first)}</div>'
            f'<div id="{i}-hover" data-minitfm-hover style="font-size:12px;color:#57606a;min-height:1.45em">'
            "(the controls need JavaScript: run the cell, or trust the notebook)</div>"
            f'<div id="{i}-views" data-minitfm-views style="display:flex;flex-wrap:wrap;gap:10px 16px"></div>'
            f'<script type="application/json" data-minitfm-data>{payload}</script>'
            f"<script>{script}</script></div>"
        )

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return f"StaticExplorer({self.name!r}, {len(self.html) / 1000:.0f} kB of self-contained HTML)"

    def save(self, path) -> Path:
        """Write a standalone page (open it in any browser, offline)."""
        path = Path(path)
        page = ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
                '<meta name="viewport" content="width=device-width, initial-scale=1">'
                f"<title>{_text_for_html(self.title)}</title></head>"
                f'<body style="margin:8px;background:#fff">{self.html}</body></html>')
        path.write_text(page, encoding="utf-8")
        return path


def _control(key: str, label: str, options, value: int = 0, kind: str = "range") -> dict:
    return {"key": key, "label": label, "type": kind, "options": [str(o) for o in options], "value": value}


def _closest(values, target) -> int:
    return min(range(len(values)), key=lambda i: abs(values[i] - target))


def _readout_grid(keys, sizes, fn) -> dict:
    """Precompute one readout string for every combination of the controls ``keys`` (row-major)."""
    return {"by": list(keys), "texts": [fn(*combo) for combo in itertools.product(*(range(n) for n in sizes))]}


def static_attention_explorer(weights, tokens_q=None, tokens_k=None, *, batch_index: int = 0) -> StaticExplorer:
    """Attention maps by kind, layer and head, with values on hover. Same inputs as ``attention_explorer``:
    ``{kind: [(B, H, T_q, T_k) per layer]}``, a plain list of layers, or a model's ``Intermediates``."""
    maps = xd.attention_maps(weights)
    labels = xd.label_sets(maps, tokens_q, tokens_k)
    kinds = list(maps)
    stacks = {k: torch.stack([xd.pick_batch(w, batch_index) for w in maps[k]]) for k in kinds}  # L x (H, T_q, T_k) -> (L, H, T_q, T_k)
    n_layers, n_heads = max(len(maps[k]) for k in kinds), max(s.shape[1] for s in stacks.values())

    def readout(ki, layer, head):
        kind, stack = kinds[ki], stacks[kinds[ki]]
        if layer >= stack.shape[0] or head >= stack.shape[1]:
            return f"{xd.KIND_TITLES.get(kind, kind)} has {stack.shape[0]} layers of {stack.shape[1]} heads"
        return xd.attention_readout(kind, layer, head, stack[layer, head], *labels[kind])

    spec = {
        "controls": [_control("kind", "kind", [xd.KIND_TITLES.get(k, k) for k in kinds], kind="select"),
                     _control("layer", "layer", range(n_layers)), _control("head", "head", range(n_heads))],
        "arrays": {f"w_{k}": stacks[k] for k in kinds},
        "labels": {f"{axis}_{k}": labels[k][a] for k in kinds for a, axis in enumerate(("rows", "cols"))},
        "views": [{"type": "heatmap", "array": {"by": "kind", "names": [f"w_{k}" for k in kinds]},
                   "index": ["layer", "head"], "vmin": 0.0, "vmax": 1.0, "basis": 420,
                   "rows": {"by": "kind", "names": [f"rows_{k}" for k in kinds]},
                   "cols": {"by": "kind", "names": [f"cols_{k}" for k in kinds]},
                   "title": "attention weight (row = query, column = key)", "xlabel": "key", "ylabel": "query",
                   "missing": "this kind has fewer layers or heads"}],
        "readouts": [_readout_grid(["kind", "layer", "head"], [len(kinds), n_layers, n_heads], readout)],
        "hint": "hover over (or tap) a cell to read its weight",
    }
    return StaticExplorer("attention", "Attention maps: choose kind, layer and head", spec)


def static_scaling_explorer(seq_len: int = 8, d_k_values=tuple(2 ** i for i in range(11)), bins: int = 30,
                            seed: int = 0) -> StaticExplorer:
    """d_k and scaled/unscaled -> score histogram, softmax heatmap and mean row entropy across d_k."""
    grid = [[xd.scaling_data(d, s, seq_len=seq_len, seed=seed) for d in d_k_values] for s in (True, False)]
    ranges = torch.tensor([[[float(g["scores"].min()), float(g["scores"].max())] for g in row] for row in grid])
    hist = torch.stack([torch.stack([torch.histc(g["scores"], bins, float(r[0]), float(r[1])) for g, r in zip(row, rr)])
                        for row, rr in zip(grid, ranges)])  # (2, n_dk, bins)
    spec = {
        "controls": [_control("d_k", "d_k", d_k_values, value=_closest(d_k_values, 64)),
                     _control("scaled", "scores", ["scaled by 1/√d_k", "unscaled"], kind="select")],
        "arrays": {"hist": hist, "range": ranges,
                   "weights": torch.stack([torch.stack([g["weights"] for g in row]) for row in grid]),
                   "entropy": torch.tensor([[float(g["entropy"].mean()) for g in row] for row in grid])},
        "labels": {"d_k": [str(d) for d in d_k_values]},
        "views": [
            {"type": "bars", "title": "distribution of the scores q · k", "series": [
                {"array": "hist", "index": ["scaled", "d_k"], "label": "count", "color": "#3b528b"}],
             "range": "range", "rangeIndex": ["scaled", "d_k"], "xlabel": "score", "ylabel": "count", "zero": True},
            {"type": "heatmap", "title": "softmax weights of 8 queries over 8 keys", "array": "weights",
             "index": ["scaled", "d_k"], "vmin": 0.0, "vmax": 1.0, "xlabel": "key", "ylabel": "query"},
            {"type": "lines", "title": "mean row entropy (nats) against d_k", "x": "d_k", "marker": "d_k",
             "series": [{"array": "entropy", "index": [0], "label": "scaled", "color": "#21908d"},
                        {"array": "entropy", "index": [1], "label": "unscaled", "color": "#440154"}],
             "hline": float(np.log(seq_len)), "ymin": 0.0, "ymax": float(np.log(seq_len)) * 1.08,
             "xlabel": "d_k (dashed: uniform attention)", "ylabel": "entropy"},
        ],
        "readouts": [_readout_grid(["scaled", "d_k"], [2, len(d_k_values)],
                                   lambda s, d: xd.scaling_readout(d_k_values[d], s == 0, grid[s][d]))],
        "hint": "hover over a heatmap cell to read its weight",
    }
    return StaticExplorer("scaling", "Why divide by √d_k: scores, softmax and entropy", spec)


def static_mask_explorer(tokens=None, labels=None, pad_id: int = 0) -> StaticExplorer:
    """Padding / causal / both on a padded (B, T) batch: the mask and the weights it gives equal scores."""
    tokens, rows, pad_id = xd.mask_batch(tokens, labels, pad_id)
    data = [xd.mask_data(tokens, pad_id, kind) for kind in xd.MASK_KINDS]
    by_seq = {"by": "sequence", "names": [f"seq{b}" for b in range(len(rows))]}
    common = {"index": ["kind", "sequence"], "vmin": 0.0, "vmax": 1.0, "rows": by_seq, "cols": by_seq,
              "xlabel": "key", "ylabel": "query"}
    spec = {
        "controls": [_control("kind", "mask", xd.MASK_KINDS, value=2, kind="select"),
                     _control("sequence", "sequence", range(len(rows)))],
        "arrays": {"mask": torch.stack([d["mask"].float() for d in data]),  # (3, B, T, T)
                   "weights": torch.stack([d["weights"] for d in data])},
        "labels": {f"seq{b}": row for b, row in enumerate(rows)},
        "views": [{"type": "heatmap", "array": "mask", "title": "mask (1 = may attend)", "digits": 0, **common},
                  {"type": "heatmap", "array": "weights", "title": "weights when all scores are equal", **common}],
        "readouts": [_readout_grid(["kind", "sequence"], [3, len(rows)], lambda k, b: xd.mask_readout(
            xd.MASK_KINDS[k], b, rows[b], data[k]["mask"][b]))],
        "hint": "hover over a cell: 1 = the query may attend to that key",
    }
    return StaticExplorer("masks", "Masks on a padded batch: padding, causal, both", spec)


def static_positional_explorer(max_len: int = 24, d_model: int = 16, seed: int = 0) -> StaticExplorer:
    """Scheme, dimension pair and position -> encoding table, the pair's curves, similarity to other positions."""
    check_positive_int(max_len, "max_len")
    check_positive_int(d_model, "d_model")
    schemes = xd.POSITIONAL_SCHEMES
    tables = torch.stack([xd.positional_table(s, max_len, d_model, seed) for s in schemes])  # (S, T, D)
    sims = torch.stack([torch.stack([xd.positional_similarity(s, max_len, d_model, p, seed) for p in range(max_len)])
                        for s in schemes])  # (S, T, T): [scheme, position, other position]
    pairs = tables.transpose(1, 2).reshape(len(schemes), d_model // 2, 2, max_len)  # (S, T, D) -> (S, D/2, 2, T)
    spec = {
        "controls": [_control("scheme", "scheme", schemes, kind="select"),
                     _control("pair", "dim pair", range(d_model // 2)),
                     _control("position", "position", range(max_len), value=max_len // 2)],
        "arrays": {"table": tables, "pairs": pairs, "similarity": sims},
        "labels": {"positions": [str(p) for p in range(max_len)]},
        "views": [
            {"type": "heatmap", "title": "encoding: position × dimension (boxes: pair, position)", "array": "table",
             "index": ["scheme"], "xlabel": "dimension", "ylabel": "position",
             "highlight": {"col": "pair", "span": 2, "row": "position"}},
            {"type": "lines", "title": "the pair's two dimensions along the positions", "x": "positions",
             "marker": "position", "xlabel": "position", "ylabel": "value",
             "series": [{"array": "pairs", "index": ["scheme", "pair", 0], "label": "even dim"},
                        {"array": "pairs", "index": ["scheme", "pair", 1], "label": "odd dim"}]},
            {"type": "lines", "title": "similarity of the chosen position to every position", "x": "positions",
             "marker": "position", "xlabel": "position", "ylabel": "similarity", "hline": 0.0,
             "series": [{"array": "similarity", "index": ["scheme", "position"], "label": "similarity"}]},
        ],
        "readouts": [_readout_grid(["scheme", "pair", "position"], [len(schemes), d_model // 2, max_len],
                                   lambda s, i, p: xd.positional_readout(schemes[s], i, p, tables[s], sims[s, p]))],
        "hint": "hover over the table to read a value",
    }
    return StaticExplorer("positional", "Positional encodings: scheme, dimension pair, position", spec)


def static_sampling_explorer(logits=None, labels=None, history=None, *, temperatures=(0.5, 0.7, 0.8, 0.9, 1.0, 1.5, 2.0),
                             top_ks=(0, 1, 3, 5, 10), top_ps=(1.0, 0.95, 0.9, 0.7, 0.5),
                             penalties=(1.0, 1.1, 1.3, 1.5, 2.0)) -> StaticExplorer:
    """Temperature, top-k (0 = off), top-p and repetition penalty -> next-token distribution before and after."""
    if logits is None:
        logits, labels, history = xd.example_logits()
    history = torch.zeros(0, dtype=torch.long) if history is None else history
    labels = xd.check_labels(labels, logits.shape[-1], "labels")
    order = logits.float().argsort(descending=True, stable=True)  # show tokens from most to least likely
    grid = list(itertools.product(temperatures, top_ks, top_ps, penalties))
    results = [xd.sampling_data(logits, history, *combo) for combo in grid]
    after = torch.stack([r["after"][order] for r in results]).reshape(
        len(temperatures), len(top_ks), len(top_ps), len(penalties), -1)  # (n_t * n_k * n_p * n_r, V) -> (n_t, n_k, n_p, n_r, V)
    before = results[0]["before"][order]
    seen = set(history.tolist())
    names = [labels[i] + ("*" if i in seen else "") for i in order.tolist()]
    texts = [xd.sampling_readout(r["before"], r["after"], labels) for r in results]
    spec = {
        "controls": [_control("t", "temperature", temperatures, value=_closest(temperatures, 1.0)),
                     _control("k", "top-k", ["off" if k == 0 else k for k in top_ks]),
                     _control("p", "top-p", top_ps), _control("r", "rep. penalty", penalties)],
        "arrays": {"before": before, "after": after},
        "labels": {"tokens": names},
        "views": [{"type": "bars", "title": "next-token probability (* = already in the text)", "cats": "tokens",
                   "basis": 480, "ymin": 0.0, "xlabel": "token", "ylabel": "probability",
                   "series": [{"array": "before", "label": "before", "color": "#9aa5b1"},
                              {"array": "after", "index": ["t", "k", "p", "r"], "label": "after", "color": "#21908d"}]}],
        "readouts": [{"by": ["t", "k", "p", "r"], "texts": texts}],
    }
    return StaticExplorer("sampling", "Sampling: temperature, top-k, top-p, repetition penalty", spec)


