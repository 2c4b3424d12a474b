"""A GRU VAE over token sequences and the codec between objects and its latent space, the
half of latent-space BO that turns structured objects into Gaussian posteriors and back.

* ``SequenceVAE``: a GRU VAE over token sequences whose encoder returns a Gaussian posterior
  (mean, diagonal covariance); ``train_vae`` fits or fine-tunes it.
* ``TokenCodec``: objects ↔ token sequences ↔ latent posteriors; ``decode`` returns ``None``
  for a sequence that is not a valid object (never raises). ``selfies_codec`` (molecules, via
  SELFIES and rdkit) is in ``neurips26.bayesopt.chem``.
* ``save_vae`` / ``load_vae``: a codec on disk (written atomically).

The BO loop over this latent space is ``neurips26.bayesopt.lsbo``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable, Sequence

import torch
from torch import Tensor, nn

__all__ = ["SequenceVAE", "train_vae", "TokenCodec", "save_vae", "load_vae", "PAD", "BOS", "EOS", "SPECIALS"]

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
    generator = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(vae.parameters(), lr=lr)
    vae.train()
    history = []
    for epoch in range(epochs):
        if weights is None:
            order = torch.randperm(len(tokens), generator=generator)
        else:
            order = torch.multinomial(weights / weights.sum(), len(tokens), replacement=True, generator=generator)
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



def save_vae(codec: TokenCodec, path, meta: dict | None = None) -> None:
    """Write the codec's VAE, vocabulary and ``meta`` to ``path`` atomically (temp + rename)."""
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
