"""The two-proportion z-test against scipy's chi-square test of the 2 x 2 table."""
import numpy as np
import pytest
from scipy.stats import chi2_contingency, norm

from minitfm.evaluation import two_proportion_test


@pytest.mark.parametrize("ka, na, kb, nb", [(194, 300, 214, 300), (30, 100, 45, 120), (5, 20, 15, 22), (0, 10, 3, 10)])
def test_equals_scipy_chi_square_without_correction(ka, na, kb, nb):
    got = two_proportion_test(ka, na, kb, nb)
    chi2, p, _, _ = chi2_contingency(np.array([[ka, na - ka], [kb, nb - kb]]), correction=False)
    assert got.z ** 2 == pytest.approx(chi2, rel=1e-10)
    assert got.p_value == pytest.approx(p, rel=1e-8)
    assert got.difference == pytest.approx(ka / na - kb / nb)
    assert np.sign(got.z) == np.sign(got.difference)


def test_non_overlap_of_two_95_intervals_is_p_near_0006():
    """Schenker and Gentleman (2001): equal standard errors, intervals just touching: z = 2 * 1.96 / sqrt(2)."""
    z = 2 * 1.959964 / np.sqrt(2)
    assert 2 * norm.sf(z) == pytest.approx(0.0056, abs=2e-4)


def test_degenerate_and_bad_input():
    assert two_proportion_test(10, 10, 5, 5).p_value == 1.0
    with pytest.raises(ValueError, match="cannot exceed"):
        two_proportion_test(11, 10, 1, 5)
    with pytest.raises(TypeError, match="n_a must be an int"):
        two_proportion_test(1, 10.0, 1, 5)
