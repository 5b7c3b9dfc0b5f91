import pytest
import torch

from minitfm.training.precision import FORMATS, cast_report, format_info


def test_format_info_hand_values():
    fp16, bf16, fp32 = (format_info(d) for d in FORMATS)
    assert fp16["max"] == 65504.0 and fp16["smallest_normal"] == 2.0 ** -14 and fp16["smallest_subnormal"] == 2.0 ** -24
    assert bf16["eps"] == 2.0 ** -7 and bf16["smallest_subnormal"] == 2.0 ** -133
    assert fp32["smallest_subnormal"] == 2.0 ** -149
    # the smallest subnormal really is representable, and half of it rounds to zero
    assert torch.tensor(fp16["smallest_subnormal"]).half().item() > 0
    assert torch.tensor(fp16["smallest_subnormal"] / 2).half().item() == 0
    with pytest.raises(TypeError, match="floating torch.dtype"):
        format_info(torch.int32)


def test_cast_report_counts_underflow_overflow_and_subnormals():
    values = torch.tensor([1e-9, 1e-6, 1.0, 1e5, 0.0])  # the zero is ignored
    report = cast_report(values, torch.float16)
    assert report == {"underflow": 0.25, "overflow": 0.25, "subnormal": 0.25}
    scaled = cast_report(values, torch.float16, scale=1024.0)  # 1e-6 becomes normal, 1e-9 subnormal
    assert scaled == {"underflow": 0.0, "overflow": 0.25, "subnormal": 0.25}
    assert cast_report(values, torch.bfloat16)["overflow"] == 0.0
    # the boundary: the smallest normal float16 (2^-14) is normal, half of it (2^-15) subnormal
    assert cast_report(torch.tensor([2.0 ** -14, 2.0 ** -15]), torch.float16)["subnormal"] == 0.5
    with pytest.raises(ValueError, match="scale"):
        cast_report(values, torch.float16, scale=0.0)
