import pytest
import torch

import tests.toy_envs  # noqa: F401  (registers rlkit-test/* envs)

torch.set_num_threads(1)


@pytest.fixture
def logdir(tmp_path):
    return str(tmp_path / "runs")
