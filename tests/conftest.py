import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    # The tests use tiny tensors: extra threads only add synchronisation, and on a shared machine busy
    # OpenMP threads make every op many times slower. One thread is faster and just as deterministic.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
