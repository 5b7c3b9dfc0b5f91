import pytest
import torch

from minitfm import causal_mask, combine_masks, padding_mask


def test_padding_mask_shape_and_values():
    tokens = torch.tensor([[5, 6, 0, 0], [7, 8, 9, 0]])
    mask = padding_mask(tokens, pad_id=0)
    assert mask.shape == (2, 1, 1, 4)
    assert mask[0, 0, 0].tolist() == [True, True, False, False]
    assert mask[1, 0, 0].tolist() == [True, True, True, False]


def test_causal_mask_square_is_lower_triangular():
    mask = causal_mask(4)
    assert mask.shape == (1, 4, 4)
    assert torch.equal(mask[0], torch.tril(torch.ones(4, 4, dtype=torch.bool)))


def test_causal_mask_is_bottom_right_aligned():
    mask = causal_mask(2, 5)[0]
    # the two queries are positions 3 and 4 of a 5-token sequence
    assert mask.tolist() == [[True, True, True, True, False], [True, True, True, True, True]]


def test_combine_masks_is_logical_and_with_broadcasting():
    tokens = torch.tensor([[5, 6, 0]])
    combined = combine_masks(padding_mask(tokens, 0), causal_mask(3), None)
    assert combined.shape == (1, 1, 3, 3)
    assert combined[0, 0].tolist() == [[True, False, False], [True, True, False], [True, True, False]]
    assert combine_masks(None, None) is None


def test_mask_errors():
    with pytest.raises(ValueError, match="t_k >= t_q.*t_q=5, t_k=3"):
        causal_mask(5, 3)
    with pytest.raises(ValueError, match="t_q must be >= 1, got 0"):
        causal_mask(0)
    with pytest.raises(ValueError, match="tokens must have 2 dimensions, got 1"):
        padding_mask(torch.tensor([1, 2, 0]), 0)
    with pytest.raises(TypeError, match="integer token ids"):
        padding_mask(torch.zeros(2, 3), 0)
    with pytest.raises(TypeError, match="masks must be boolean.*mask 1 has dtype torch.int64"):
        combine_masks(causal_mask(2), torch.ones(1, 2, 2, dtype=torch.long))


def test_padding_mask_rejects_boolean_tokens():
    with pytest.raises(TypeError, match="tokens must hold integer token ids, got dtype torch.bool"):
        padding_mask(torch.ones(2, 3, dtype=torch.bool), 0)
