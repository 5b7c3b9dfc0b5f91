"""Seeing inside the models: plots, explorers and diagrams. No model code imports this package.

==========================  ==============================================================================
``explorer_data``           the numbers every view shows, computed once (one data source, three views)
``plotting``                matplotlib figures: attention heatmaps, curves
``explorers``               ipywidgets explorers with sliders (in a running notebook)
``chat_box``                a chat box over a reply function (in a running notebook), labelled in its edition's language
``static_explorers``        the same explorers as self-contained HTML for the book's pages
``scale_explorer``          the static explorer of training memory at scale (chapter 12)
``explorer_engine.js``      the static explorers' browser engine
``live_model``              the live model of the pages: the shipped models, the site's scripts, the explorer's cell
``live_asset``              the live model's asset format: a model's weights and tokenizer as the engine reads them
``live_engine.js``          the live model's engine, no DOM (browser and Node): forward pass, tokenizers, sampling
``live_model.js``           the live model's page interface: the explorer and the chat around the engine
``compare_box``             the models side by side in the page: one question, each model's reply from the browser
``diagrams``                the book's diagrams: attention, masks, heads, blocks, the KV cache
``finetuning_diagrams``     chapter 15's diagrams: the LoRA update, a chat's token spans and its loss mask
``drawing``                 the pen behind the diagrams: boxes, arrows, grids, the palette
==========================  ==============================================================================
"""
from minitfm import _lazy


def __getattr__(name):  # a submodule, loaded on first attribute access
    return _lazy.submodule(__name__, __path__, name)


def __dir__():
    return _lazy.names(globals(), __path__)
