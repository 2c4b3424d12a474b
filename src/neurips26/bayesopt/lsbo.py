"""Latent-space Bayesian optimization (LSBO) over structured objects through a VAE.

Pieces, each usable alone:

* ``SequenceVAE``: a GRU VAE over token sequences whose encoder returns a Gaussian posterior
  (mean, diagonal covariance); ``train_vae`` fits or fine-tunes it.
* ``TokenCodec``: objects ↔ token sequences ↔ latent posteriors; ``decode`` returns ``None``
  for a sequence that is not a valid object (never raises). ``SelfiesCodec`` (molecules, via
  SELFIES and rdkit) is in ``neurips26.bayesopt.chem``.
* ``LatentSpaceBO``: the loop of LOL-BO's shape: a GP surrogate over encoder posteriors, a
  trust region around the incumbent (TuRBO's success/failure rule), candidates from TuRBO's
  box, the first-order geodesic (Mahalanobis) ball of the encoder's Fisher metric, or an
  isotropic ball (``geometry``), decoded and re-encoded so that each candidate enters the
  kernel as the posterior of the object it decodes to; batch Thompson sampling on the
  candidates; the objective (a plain callable on objects) evaluated on the decoded objects;
  every ``finetune_every`` steps the VAE is fine-tuned on the best objects and all data are
  re-encoded.

Surrogates (``kernel=``): ``"marginalized"`` (``MarginalizedQuadraticKernel`` on [m, diag S]),
``"expected-rbf"`` (``ExpectedRBFKernel``, the RBF averaged over both posteriors) and
``"rbf"`` (a plain RBF on the means), each inside a ``ScaleKernel``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
from torch import Tensor, nn

from ._gp import load_hyperparameters
from .geometry import isotropic_ball, mahalanobis_ball, trust_region_box

__all__ = ["SequenceVAE", "train_vae", "TokenCodec", "LatentSpaceBO", "LSBOResult", "make_surrogate", "save_vae", "load_vae"]

PAD, BOS, EOS = 0, 1, 2
SPECIALS = ("<pad>", "<bos>", "<eos>")


class SequenceVAE(nn.Module):
    """GRU encoder → (mean, log-variance) of a diagonal Gaussian q(z | x); GRU decoder
    conditioned on z (initial state and every input). Greedy decoding by ``generate``."""

    def __init__(self, vocab_size: int, latent_dim: int = 16, embed_dim: int = 48, hidden: int = 192):
        super().__init__()
        if vocab_size <= len(SPECIALS) or latent_dim < 1:
            raise ValueError(f"need vocab_size > {len(SPECIALS)} and latent_dim >= 1")
        self.vocab_size, self.latent_dim = vocab_size, latent_dim
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD)
        self.encoder = nn.GRU(embed_dim, hidden, batch_first=True, bidirectional=True)
        self.to_stats = nn.Linear(2 * hidden, 2 * latent_dim)
        self.z_to_h = nn.Linear(latent_dim, hidden)
        self.decoder = nn.GRU(embed_dim + latent_dim, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab_size)

    def encode(self, tokens: Tensor) -> tuple[Tensor, Tensor]:
        """(mean, variance), each (B, latent_dim), of q(z | tokens); tokens (B, T) padded."""
        lengths = (tokens != PAD).sum(1).clamp_min(1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(self.embed(tokens), lengths, batch_first=True,
                                                   enforce_sorted=False)
        _, h = self.encoder(packed)
        mean, logvar = self.to_stats(torch.cat([h[0], h[1]], -1)).chunk(2, -1)
        return mean, logvar.clamp(-12, 6).exp()

    def _decode(self, z: Tensor, inputs: Tensor, h: Tensor | None = None):
        x = torch.cat([self.embed(inputs), z[:, None, :].expand(-1, inputs.shape[1], -1)], -1)
        if h is None:
            h = torch.tanh(self.z_to_h(z))[None]
        y, h = self.decoder(x, h)
        return self.out(y), h

    def loss(self, tokens: Tensor, beta: float = 0.1) -> Tensor:
        """Mean per-sequence negative ELBO with KL weight ``beta``; ``tokens`` end in EOS."""
        mean, var = self.encode(tokens)
        z = mean + var.sqrt() * torch.randn_like(mean)
        inputs = torch.cat([torch.full_like(tokens[:, :1], BOS), tokens[:, :-1]], 1)
        logits, _ = self._decode(z, inputs)
        rec = nn.functional.cross_entropy(logits.transpose(1, 2), tokens, ignore_index=PAD, reduction="sum")
        kl = 0.5 * (var + mean**2 - 1 - var.log()).sum()
        return (rec + beta * kl) / len(tokens)

    @torch.no_grad()
    def generate(self, z: Tensor, max_len: int) -> Tensor:
        """Greedy decoding, (B, max_len) token ids, PAD after the first EOS."""
        B = len(z)
        tok = torch.full((B, 1), BOS, dtype=torch.long)
        h, out = None, []
        done = torch.zeros(B, dtype=torch.bool)
        for _ in range(max_len):
            logits, h = self._decode(z, tok, h)
            tok = logits[:, -1].argmax(-1, keepdim=True)
            tok[done] = PAD
            out.append(tok)
            done |= tok[:, 0] == EOS
            if done.all():
                break
        seq = torch.cat(out, 1)
        return nn.functional.pad(seq, (0, max_len - seq.shape[1]), value=PAD)


def train_vae(vae: SequenceVAE, tokens: Tensor, epochs: int = 10, batch_size: int = 128, lr: float = 2e-3,
              beta: float = 0.1, weights: Tensor | None = None, seed: int = 0,
              on_epoch: Callable[[int, float], None] | None = None) -> list[float]:
    """Fit (or fine-tune) ``vae`` on padded ``tokens`` (N, T); ``weights`` (N,) resample
    the sequences (LOL-BO's weighted retraining). Returns the mean loss of each epoch."""
    if tokens.ndim != 2 or len(tokens) == 0:
        raise ValueError(f"tokens must be a non-empty (N, T) tensor, got {tuple(tokens.shape)}")
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(vae.parameters(), lr=lr)
    vae.train()
    history = []
    for epoch in range(epochs):
        if weights is None:
            order = torch.randperm(len(tokens), generator=gen)
        else:
            order = torch.multinomial(weights / weights.sum(), len(tokens), replacement=True, generator=gen)
        total, n = 0.0, 0
        for idx in order.split(batch_size):
            loss = vae.loss(tokens[idx], beta)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(vae.parameters(), 5.0)
            opt.step()
            total, n = total + loss.item() * len(idx), n + len(idx)
        history.append(total / n)
        if on_epoch:
            on_epoch(epoch, history[-1])
    vae.eval()
    return history


class TokenCodec:
    """Objects ↔ token lists ↔ the VAE's latent posteriors.

    ``to_tokens(obj) -> list[str]`` and ``from_tokens(list[str]) -> obj | None`` define the
    object language; ``None`` (or an exception) from ``from_tokens`` marks an invalid decode."""

    def __init__(self, vocab: Sequence[str], max_len: int, to_tokens: Callable, from_tokens: Callable,
                 vae: SequenceVAE | None = None, latent_dim: int = 16):
        self.itos = list(SPECIALS) + [t for t in vocab if t not in SPECIALS]
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        self.max_len, self.to_tokens, self.from_tokens = max_len, to_tokens, from_tokens
        self.vae = vae or SequenceVAE(len(self.itos), latent_dim)

    @property
    def latent_dim(self) -> int:
        return self.vae.latent_dim

    def tensorize(self, objects: Sequence) -> Tensor:
        """Padded ids (N, max_len) ending in EOS; raises on unknown tokens or too-long objects."""
        rows = []
        for obj in objects:
            toks = self.to_tokens(obj)
            if len(toks) + 1 > self.max_len:
                raise ValueError(f"{obj!r} has {len(toks)} tokens; the codec holds at most {self.max_len - 1}")
            unknown = [t for t in toks if t not in self.stoi]
            if unknown:
                raise ValueError(f"{obj!r} has tokens outside the vocabulary: {unknown[:5]}")
            ids = [self.stoi[t] for t in toks] + [EOS]
            rows.append(ids + [PAD] * (self.max_len - len(ids)))
        return torch.tensor(rows, dtype=torch.long)

    def fits(self, obj) -> bool:
        try:
            self.tensorize([obj])
            return True
        except (ValueError, KeyError):
            return False

    @torch.no_grad()
    def encode(self, objects: Sequence, batch_size: int = 512) -> tuple[Tensor, Tensor]:
        self.vae.eval()
        parts = [self.vae.encode(t) for t in self.tensorize(objects).split(batch_size)]
        return torch.cat([p[0] for p in parts]).double(), torch.cat([p[1] for p in parts]).double()

    def decode(self, z: Tensor) -> list:
        """One object (or None where the decode is invalid) per latent row."""
        self.vae.eval()
        ids = self.vae.generate(z.float(), self.max_len)
        out = []
        for row in ids.tolist():
            toks = []
            for i in row:
                if i in (EOS, PAD):
                    break
                toks.append(self.itos[i])
            try:
                out.append(self.from_tokens(toks) if toks else None)
            except Exception:  # noqa: BLE001 - an undecodable sequence is an invalid object, not a crash
                out.append(None)
        return out


def make_surrogate(kind: str, X: Tensor, Y: Tensor, latent_dim: int, lengthscale_init: float | None = None,
                   state: dict | None = None, maxiter: int = 200):
    """A SingleTaskGP on inputs [m, diag S] (n, 2d) with the ``kind`` kernel in a ScaleKernel;
    outcomes standardized; hyperparameters by marginal likelihood (L-BFGS-B, at most
    ``maxiter`` steps), warm-started from ``state`` (a previous surrogate's state_dict)."""
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.transforms import Standardize
    from gpytorch.kernels import RBFKernel, ScaleKernel
    from gpytorch.mlls import ExactMarginalLogLikelihood

    from .marginalized_kernel import ExpectedRBFKernel, MarginalizedQuadraticKernel

    d = latent_dim
    if kind == "marginalized":
        base = MarginalizedQuadraticKernel(covariance="diag", latent_dims=d)
    elif kind == "expected-rbf":
        base = ExpectedRBFKernel(latent_dims=d)
    elif kind == "rbf":
        base = RBFKernel(ard_num_dims=d, active_dims=torch.arange(d))
    else:
        raise ValueError(f"kernel must be 'marginalized', 'expected-rbf' or 'rbf', got {kind!r}")
    if lengthscale_init is not None and kind != "marginalized":
        base.lengthscale = lengthscale_init
    model = SingleTaskGP(X, Y.reshape(-1, 1), covar_module=ScaleKernel(base), outcome_transform=Standardize(1))
    load_hyperparameters(model, state)
    try:
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model),
                         optimizer_kwargs={"options": {"maxiter": maxiter}})
    except Exception:  # noqa: BLE001 - keep the initial hyperparameters if the fit fails
        pass
    return model.eval()


@dataclass
class LSBOResult:
    objects: list  # every evaluated object, in order
    scores: list  # their objective values
    n_invalid: int  # candidates whose decode or evaluation was invalid
    n_duplicates: int  # decoded candidates already evaluated
    n_proposed: int
    best_curve: list = field(default_factory=list)  # best score after each batch

    @property
    def best(self):
        i = max(range(len(self.scores)), key=self.scores.__getitem__)
        return self.objects[i], self.scores[i]

    def top_k_mean(self, k: int = 10) -> float:
        top = sorted(self.scores, reverse=True)[:k]
        return sum(top) / len(top)


class LatentSpaceBO:
    """LSBO over ``codec`` maximizing ``objective(obj) -> float`` (None, NaN or an exception
    mark an invalid object: counted, never fatal).

    ``kernel``: "marginalized" | "expected-rbf" | "rbf"; ``sampler``: "turbo" (box),
    "geometry" (Mahalanobis ball of G = diag(S_best)⁻¹ normalized to unit determinant, radius
    half the box side, inside the box) or "isotropic". The trust region starts at side
    ``length_init`` (in units of the latent prior's sd), doubles after 3 successes, halves
    after ``max(4, d // batch)`` failures, and restarts at the incumbent when below ``length_min``."""

    def __init__(self, codec: TokenCodec, objective: Callable, kernel: str = "marginalized", sampler: str = "turbo",
                 batch_size: int = 10, n_candidates: int = 256, finetune_every: int = 0, finetune_epochs: int = 2,
                 length_init: float = 1.6, length_min: float = 0.05, length_max: float = 3.2,
                 lengthscale_init: float | None = None, seed: int = 0):
        if sampler not in ("turbo", "geometry", "isotropic"):
            raise ValueError(f"sampler must be 'turbo', 'geometry' or 'isotropic', got {sampler!r}")
        if kernel not in ("marginalized", "expected-rbf", "rbf"):
            raise ValueError(f"kernel must be 'marginalized', 'expected-rbf' or 'rbf', got {kernel!r}")
        self.codec, self.objective, self.kernel, self.sampler = codec, objective, kernel, sampler
        self.batch_size, self.n_candidates = batch_size, n_candidates
        self.finetune_every, self.finetune_epochs = finetune_every, finetune_epochs
        self.length_init, self.length_min, self.length_max = length_init, length_min, length_max
        self.lengthscale_init = lengthscale_init
        self.generator = torch.Generator().manual_seed(seed)
        self.seed = seed

    def _score(self, obj) -> float | None:
        if obj is None:
            return None
        try:
            y = self.objective(obj)
        except Exception:  # noqa: BLE001 - an objective that fails on an object marks it invalid
            return None
        if y is None or not math.isfinite(float(y)):
            return None
        return float(y)

    def _candidates(self, center: Tensor, center_var: Tensor, length: float) -> Tensor:
        d = len(center)
        lo, hi = center - length / 2, center + length / 2
        n, g = self.n_candidates, self.generator
        if self.sampler == "turbo":
            return trust_region_box(center, torch.full((d,), length, dtype=center.dtype), n, lo, hi, g)
        if self.sampler == "isotropic":
            return isotropic_ball(center, length / 2, n, lo, hi, g)
        metric = torch.diag(1.0 / center_var)
        metric = metric / torch.exp(torch.log(torch.diag(metric)).mean())  # unit determinant: same volume scale
        return mahalanobis_ball(center, metric, length / 2, n, lo, hi, g)

    def run(self, init_objects: Sequence, budget: int, progress: Callable[[int, float], None] | None = None) -> LSBOResult:
        """Evaluate ``init_objects``, then ``budget`` more objective calls chosen by BO."""
        objects, scores = [], []
        n_invalid = 0
        for obj in init_objects:
            y = self._score(obj)
            if y is None:
                n_invalid += 1
            else:
                objects.append(obj)
                scores.append(y)
        if len(objects) < 2:
            raise ValueError("need at least two valid initial objects with finite scores")
        seen = set(map(self._key, objects))
        m, v = self.codec.encode(objects)
        length, succ, fail = self.length_init, 0, 0
        fail_tol = max(4, math.ceil(self.codec.latent_dim / self.batch_size))
        used, n_dup, n_prop, step, stalls = 0, 0, 0, 0, 0
        state = None  # the previous surrogate's hyperparameters: each fit starts from them
        curve = [max(scores)]
        while used < budget:
            step += 1
            if self.finetune_every and step % self.finetune_every == 0:
                self._finetune(objects, scores)
                m, v = self.codec.encode(objects)
            Y = torch.tensor(scores, dtype=torch.float64)
            best = int(Y.argmax())
            z = self._candidates(m[best], v[best], length)
            decoded = self.codec.decode(z)
            n_prop += len(decoded)
            fresh, keys = [], set()
            for obj in decoded:
                if obj is None:
                    n_invalid += 1
                    continue
                k = self._key(obj)
                if k in seen or k in keys:
                    n_dup += 1
                    continue
                if not self.codec.fits(obj):
                    n_invalid += 1
                    continue
                keys.add(k)
                fresh.append(obj)
            q = min(self.batch_size, budget - used)
            if not fresh:  # the region decodes only to known objects: widen it
                stalls += 1
                length = min(2 * length, self.length_max)
                if stalls >= 10:  # nothing new decodes anywhere near: stop rather than spin
                    break
                continue
            stalls = 0
            model = make_surrogate(self.kernel, torch.cat([m, v], -1), Y, self.codec.latent_dim,
                                   self.lengthscale_init, state=state)
            state = model.state_dict()
            cm, cv = self.codec.encode(fresh)
            with torch.no_grad():
                samples = model.posterior(torch.cat([cm, cv], -1)).rsample(torch.Size([q]))[..., 0]  # (q, N)
            chosen = []
            for s in samples:  # batch Thompson sampling without repeats
                s = s.clone()
                s[chosen] = -float("inf")
                chosen.append(int(s.argmax()))
                if len(chosen) == len(fresh):
                    break
            batch_best = -float("inf")
            for i in chosen:
                obj = fresh[i]
                seen.add(self._key(obj))
                y = self._score(obj)
                used += 1
                if y is None:
                    n_invalid += 1
                    continue
                objects.append(obj)
                scores.append(y)
                m = torch.cat([m, cm[i:i + 1]])
                v = torch.cat([v, cv[i:i + 1]])
                batch_best = max(batch_best, y)
            if batch_best > curve[-1] + 1e-3 * abs(curve[-1]):
                succ, fail = succ + 1, 0
            else:
                succ, fail = 0, fail + 1
            if succ >= 3:
                length, succ = min(2 * length, self.length_max), 0
            if fail >= fail_tol:
                length, fail = length / 2, 0
            if length < self.length_min:
                length = self.length_init
            curve.append(max(scores))
            if progress:
                progress(used, curve[-1])
        return LSBOResult(objects, scores, n_invalid, n_dup, n_prop, curve)

    def _finetune(self, objects, scores):
        """LOL-BO-style: fine-tune the VAE on the evaluated objects, weighted towards the best
        (rank weights ∝ 1 / (k·N + rank))."""
        Y = torch.tensor(scores)
        ranks = torch.empty_like(Y)
        ranks[Y.argsort(descending=True)] = torch.arange(len(Y), dtype=Y.dtype)
        weights = 1.0 / (1e-2 * len(Y) + ranks)
        train_vae(self.codec.vae, self.codec.tensorize(objects), epochs=self.finetune_epochs, lr=5e-4,
                  weights=weights, seed=self.seed)

    @staticmethod
    def _key(obj):
        return obj if isinstance(obj, (str, int, float, tuple)) else repr(obj)


def save_vae(codec: TokenCodec, path, meta: dict | None = None) -> None:
    """Write the codec's VAE, vocabulary and ``meta`` to ``path`` atomically (temp + rename)."""
    import os
    import tempfile
    from pathlib import Path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    blob = {"itos": codec.itos, "max_len": codec.max_len, "latent_dim": codec.latent_dim,
            "embed_dim": codec.vae.embed.embedding_dim, "hidden": codec.vae.decoder.hidden_size,
            "state_dict": codec.vae.state_dict(), "meta": meta or {}}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            torch.save(blob, fh)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def load_vae(path, to_tokens: Callable, from_tokens: Callable) -> tuple[TokenCodec, dict]:
    """The codec saved by ``save_vae`` and its ``meta``."""
    blob = torch.load(path, weights_only=False)
    vae = SequenceVAE(len(blob["itos"]), blob["latent_dim"], blob["embed_dim"], blob["hidden"])
    vae.load_state_dict(blob["state_dict"])
    vae.eval()
    codec = TokenCodec(blob["itos"], blob["max_len"], to_tokens, from_tokens, vae=vae)
    if codec.itos != blob["itos"]:
        raise ValueError(f"{path}: the saved vocabulary does not round-trip")
    return codec, blob["meta"]
