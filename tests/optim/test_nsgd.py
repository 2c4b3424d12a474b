import copy
import io

import pytest
import torch

from neurips26.optim import NSGD, Linf, Spectral, get_norm


def test_nsgd_step_closed_form_without_momentum():
    p = torch.nn.Parameter(torch.tensor([3.0, -4.0]))
    opt = NSGD([p], lr=0.5, beta=0.0, norm="l2")
    p.grad = torch.tensor([3.0, 4.0])
    opt.step()
    torch.testing.assert_close(p.detach(), torch.tensor([3.0 - 0.3, -4.0 - 0.4]))
    opt = NSGD([p], lr=0.1, beta=0.0, norm="linf", weight_decay=0.5)
    before = p.detach().clone()
    opt.step()
    torch.testing.assert_close(p.detach(), before * (1 - 0.05) - 0.1 * torch.sign(p.grad))


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def _train(model, opt, steps, seed=0):
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(16, 4, generator=generator)
        loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()


@pytest.mark.parametrize("norm", ["l2", "linf", "spectral-mixed"])
def test_state_dict_round_trip_resumes_identically(norm):
    spec = (lambda p: Spectral() if p.ndim >= 2 else Linf()) if norm == "spectral-mixed" else norm
    a = _model()
    opt_a = NSGD(a.parameters(), lr=0.01, beta=0.9, norm=spec, nesterov=True)
    _train(a, opt_a, 5)
    b = _model()
    b.load_state_dict(a.state_dict())
    opt_b = NSGD(b.parameters(), lr=0.5, beta=0.1, norm=spec)
    if norm != "spectral-mixed":  # named norms survive a real torch.save round trip
        buf = io.BytesIO()
        torch.save(opt_a.state_dict(), buf)
        buf.seek(0)
        opt_b.load_state_dict(torch.load(buf, weights_only=False))
    else:  # in memory, the state dict shares the momentum tensors: copy it, as torch advises
        opt_b.load_state_dict(copy.deepcopy(opt_a.state_dict()))
    _train(a, opt_a, 5, seed=1)
    _train(b, opt_b, 5, seed=1)
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)


def test_nsgd_decreases_a_loss_and_validates():
    m = _model()
    first = _train(m, NSGD(m.parameters(), lr=0.02), 1)
    last = _train(m, NSGD(m.parameters(), lr=0.02), 200)
    assert last < first
    with pytest.raises(ValueError, match="learning rate"):
        NSGD(m.parameters(), lr=0)
    with pytest.raises(ValueError, match="beta"):
        NSGD(m.parameters(), beta=1.0)
    with pytest.raises(ValueError, match="norm must be"):
        NSGD(m.parameters(), norm="l1")
    with pytest.raises(ValueError, match="norm must be"):
        get_norm(3)