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
