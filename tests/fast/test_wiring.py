"""Where the fused kernels run: ``select_kernels`` picks them as documented, ``Kernels.prepare``
wires the fused MLP into a model only when they are chosen (the gym policy knows nothing of
rlkit.fast), and a head that declares no fused kind gets the plain loss under every ``kernels``."""

import gymnasium as gym
import pytest
import torch
from torch import nn

import rlkit
from rlkit.core import heads
from rlkit.core.buffer import Batch
from rlkit.core.heads import CategoricalHead, make_head, register_head
from rlkit.core.loss import ppo_loss
from rlkit.fast import loss as fast_loss
from rlkit.fast import select_kernels
from rlkit.fast.adam import FlatAdam
from rlkit.fast.loss import fused_ppo_loss
from rlkit.fast.mlp import FusedActorCritic
from rlkit.gym.trainer import PPOTrainer

CPU, CUDA = torch.device("cpu"), torch.device("cuda")  # a device object only: no GPU needed


class UndeclaredCategorical(nn.Module):
    """A user's head: the PolicyHead members, neither subclassing the protocol nor declaring
    ``fused_kind``. Its math is the built-in categorical head's."""

    action_shape: tuple[int, ...] = ()
    action_dtype = torch.int64

    def __init__(self, n: int) -> None:
        super().__init__()
        self.out_dim = n
        self.math = CategoricalHead(n)

    def sample(self, logits, generator=None):
        return self.math.sample(logits, generator)

    def log_prob(self, logits, actions):
        return self.math.log_prob(logits, actions)

    def entropy(self, logits):
        return self.math.entropy(logits)

    def log_prob_entropy(self, logits, actions):
        return self.math.log_prob_entropy(logits, actions)

    def mode(self, logits):
        return self.math.mode(logits)

    def to_env(self, actions):
        return actions

    def numpy_sampler(self):
        return self.math.numpy_sampler()


@pytest.fixture
def undeclared(monkeypatch):
    """Discrete actions get :class:`UndeclaredCategorical` for the test's duration."""
    monkeypatch.setattr(heads, "_HEADS", list(heads._HEADS))
    register_head(gym.spaces.Discrete, lambda space: UndeclaredCategorical(int(space.n)))


@pytest.fixture
def plain_loss_calls(monkeypatch):
    """Counts calls of the plain loss made by the fused one; the fused objective node refuses to run."""
    calls = []
    real = fast_loss.ppo_loss

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    def refuse(*args, **kwargs):
        raise AssertionError("the fused objective ran for a head that declares no fused kind")

    monkeypatch.setattr(fast_loss, "ppo_loss", counted)
    monkeypatch.setattr(fast_loss._Objective, "apply", refuse)
    return calls


def test_select_kernels_is_what_the_docs_say():
    """auto: fast for the gym MLP on the CPU only; the fused MLP only with fast on an MLP policy."""
    cases = {("auto", True, CPU): (True, True), ("auto", True, CUDA): (False, False),
             ("auto", False, CPU): (False, False), ("fast", True, CUDA): (True, True),
             ("fast", False, CPU): (True, False), ("plain", True, CPU): (False, False)}
    for (choice, small_mlp, device), (fast, fused_mlp) in cases.items():
        kernels = select_kernels(choice, small_mlp, device)
        assert (kernels.fast, kernels.fused_mlp) == (fast, fused_mlp), (choice, small_mlp, device)
        assert kernels.loss is (fused_ppo_loss if fast else ppo_loss)


@pytest.mark.parametrize("kernels,fused", [("plain", False), ("fast", True), ("auto", True)])
def test_the_gym_model_carries_fast_wiring_only_when_the_kernels_are_fast(logdir, kernels, fused):
    cfg = rlkit.preset("cartpole", num_envs=2, num_steps=64, logdir=logdir, kernels=kernels, eval_episodes=0,
                       progress=False, device="cpu")  # "auto" picks the fast kernels on the CPU
    trainer = PPOTrainer(cfg)
    try:
        if fused:
            assert isinstance(trainer.model.forward_override, FusedActorCritic)
            assert isinstance(trainer.learner.optimizer, FlatAdam) and trainer.kernels.loss is fused_ppo_loss
        else:
            assert trainer.model.forward_override is None
            assert type(trainer.learner.optimizer) is torch.optim.Adam and trainer.kernels.loss is ppo_loss
    finally:
        trainer.envs.close()


def test_the_gym_policy_does_not_import_the_fast_kernels():
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("rlkit")
    assert not graph.chain_exists("rlkit.gym.policies", "rlkit.fast", as_packages=True)


def test_every_built_in_head_declares_its_fused_kind_and_make_head_defaults_the_rest(undeclared):
    assert make_head(gym.spaces.Box(-1, 1, (2,))).fused_kind == "autograd"
    assert CategoricalHead.fused_kind == "categorical"
    head = make_head(gym.spaces.Discrete(4))
    assert isinstance(head, UndeclaredCategorical) and head.fused_kind is None
    assert not hasattr(UndeclaredCategorical, "fused_kind")  # the user's class is left as written


def test_a_head_without_fused_kind_gets_the_plain_loss_bit_for_bit(undeclared, plain_loss_calls):
    """The fused loss runs exactly the plain loss's ops for such a head, so the results are equal
    bit for bit (same ops, same machine)."""
    head = make_head(gym.spaces.Discrete(4))
    g = torch.Generator().manual_seed(0)
    n = 64
    params = torch.randn(n, 4, generator=g)
    actions = torch.randint(0, 4, (n,), generator=g)
    mb = Batch(torch.zeros(n, 1), actions, torch.randn(n, generator=g) - 1.4, torch.randn(n, generator=g),
               torch.randn(n, generator=g), torch.randn(n, generator=g))
    values = torch.randn(n, generator=g)
    results = []
    for fn in (ppo_loss, fused_ppo_loss):
        p, v = params.clone().requires_grad_(), values.clone().requires_grad_()
        out = fn(head, p, v, mb, clip_coef=0.2, clip_vloss=True, ent_coef=0.01, vf_coef=0.5, norm_adv=True)
        out.loss.backward()
        results.append((out.loss.detach(), out.pg_loss, out.v_loss, out.entropy, out.log_ratio, p.grad, v.grad))
    for plain, fused in zip(*results):
        assert torch.equal(plain, fused)
    assert len(plain_loss_calls) == 1


@pytest.mark.parametrize("kernels", ["fast", "auto"])
def test_a_head_without_fused_kind_trains_on_the_plain_loss(logdir, undeclared, plain_loss_calls, kernels):
    """The rest of the fast kernels (fused MLP, Adam step) still run; the loss is the formula, and
    the policy learns the identity task."""
    cfg = rlkit.TrainConfig(env="rlkit-test/IdentityDiscrete-v0", total_steps=12_288, num_envs=4, num_steps=64,
                            num_minibatches=4, update_epochs=2, learning_rate=3e-3, ent_coef=0.0, gamma=0.0,
                            kernels=kernels, logdir=logdir, eval_episodes=5, progress=False,
                            device="cpu")  # the fused MLP and loss are CPU kernels
    trainer = PPOTrainer(cfg)
    assert isinstance(trainer.head, UndeclaredCategorical)
    assert isinstance(trainer.model.forward_override, FusedActorCritic) and trainer.kernels.loss is fused_ppo_loss
    result = trainer.train()
    assert len(plain_loss_calls) == result.updates * cfg.num_minibatches * cfg.update_epochs
    assert result.eval_return_mean >= 15.0  # 16 steps, 1 per correct choice; random gets ~4
