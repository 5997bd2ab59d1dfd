"""An RLHF run moves between the CPU and a GPU on --resume (its device is resumable). Skipped
without a GPU."""

from pathlib import Path

import pytest
import torch

from rlkit.rlhf.config import RLHFConfig
from rlkit.rlhf.trainer import RLHFTrainer
from tests import tiny_lm
from tests.rlhf.test_rlhf import PROMPTS, good_rate, trainer

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("first,then", [("cpu", "cuda"), ("cuda", "cpu")])
def test_a_checkpoint_resumes_on_the_other_device(logdir, first, then):
    trainer(logdir, run_name="r", iterations=2, device=first, checkpoint_every=8 * 4).train()
    resumed = RLHFTrainer(RLHFConfig(resume=str(Path(logdir) / "r")), reward=good_rate, policy=tiny_lm.causal_lm(),
                          tokenizer=tiny_lm.tokenizer(), prompts=PROMPTS, changes={"iterations": 4, "device": then})
    assert resumed.iteration == 2
    out = resumed.train()
    assert len(out.history) == 4 and resumed.learner.flat.data.device.type == then
    assert torch.isfinite(resumed.learner.flat.data).all()
