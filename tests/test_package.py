import pytest
import subprocess
import sys

import minitfm


def test_every_public_name_is_importable_and_documented():
    for name in minitfm.__all__:
        obj = getattr(minitfm, name)
        assert obj.__doc__ and obj.__doc__.strip(), f"minitfm.{name} has no docstring"


def test_model_code_does_not_import_plotting_or_widgets():
    code = "import sys, minitfm; print(sorted(m for m in ('matplotlib', 'ipywidgets') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_plotting_modules_load_on_first_use():
    assert minitfm.plotting.plot_attention.__module__ == "minitfm.plotting"
    assert hasattr(minitfm.static_explorers, "static_attention_explorer")


def test_set_threads_uses_the_default_unless_the_environment_overrides_it(monkeypatch):
    import torch

    from minitfm.device import set_threads

    before = torch.get_num_threads()
    try:
        monkeypatch.delenv("MINITFM_NUM_THREADS", raising=False)
        assert set_threads(1) == 1 and torch.get_num_threads() == 1
        monkeypatch.setenv("MINITFM_NUM_THREADS", "2")
        assert set_threads(1) == 2 and torch.get_num_threads() == 2
        monkeypatch.setenv("MINITFM_NUM_THREADS", "two")
        with pytest.raises(ValueError, match="MINITFM_NUM_THREADS must be a positive whole number"):
            set_threads(1)
        with pytest.raises(ValueError, match="default must be a positive whole number"):
            set_threads(0)
    finally:
        torch.set_num_threads(before)
