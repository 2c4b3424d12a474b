"""The small VAEs the LSBO reproduction uses, trained on demand and cached locally.

``pretrained_codec("molecules")``: a SELFIES GRU VAE on rdkit's 5K NCI SMILES;
``pretrained_codec("robot")``: a VAE on 5,000 procedural planar-arm designs
(``design_tasks``). Each is trained once (``neurips26 lsbo train-vae``, or on first use) and
saved under ``$NEURIPS26_CACHE`` (default ``~/.cache/neurips26``) as ``lsbo-<task>-vae-<epochs>ep.pt`` (one file per epoch count),
written atomically. Nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from .._cache import cache_root
from .vae import SequenceVAE, TokenCodec, load_vae, save_vae, train_vae

__all__ = ["TASKS", "cache_path", "training_objects", "pretrained_codec"]

TASKS = ("molecules", "robot")
DEFAULT_EPOCHS = {"molecules": 12, "robot": 30}
LATENT = {"molecules": 16, "robot": 6}


def cache_path(task: str, epochs: int | None = None) -> Path:
    """The cache file of ``task``'s VAE trained ``epochs`` epochs (default: ``DEFAULT_EPOCHS``); one file per
    epoch count, so a run gets the VAE it asks for whatever else the cache holds."""
    return cache_root() / f"lsbo-{task}-vae-{epochs or DEFAULT_EPOCHS[task]}ep.pt"


def _check(task):
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")


def training_objects(task: str) -> list:
    _check(task)
    if task == "molecules":
        from .chem import nci_smiles

        return nci_smiles()
    from .design_tasks import random_arms

    return random_arms(5000, np.random.default_rng(0))


def _codecs(task):
    if task == "molecules":
        from .chem import smiles_from_tokens, smiles_tokens

        return smiles_tokens, smiles_from_tokens
    from .design_tasks import arm_from_tokens, arm_tokens

    return arm_tokens, arm_from_tokens


def _fresh_codec(task, objects) -> TokenCodec:
    if task == "molecules":
        from .chem import selfies_codec

        return selfies_codec(objects, latent_dim=LATENT[task])
    from .design_tasks import ARM_MAX_TOKENS, ARM_VOCAB, arm_from_tokens, arm_tokens

    vae = SequenceVAE(len(ARM_VOCAB) + 3, LATENT[task], embed_dim=24, hidden=96)
    return TokenCodec(ARM_VOCAB, ARM_MAX_TOKENS + 1, arm_tokens, arm_from_tokens, vae=vae)


def pretrained_codec(task: str, epochs: int | None = None, retrain: bool = False,
                     on_epoch: Callable[[int, float], None] | None = None) -> tuple[TokenCodec, dict]:
    """The cached codec for ``task`` trained exactly ``epochs`` epochs (training and caching it first
    when absent or when ``retrain``). A VAE trained longer is another VAE: serving it would make a
    run's results depend on what the cache happened to hold (the lsbo quick reference once did)."""
    _check(task)
    epochs = epochs or DEFAULT_EPOCHS[task]
    path = cache_path(task, epochs)
    if path.exists() and not retrain:
        codec, meta = load_vae(path, *_codecs(task))
        if meta.get("epochs") == epochs:
            return codec, meta
    import torch

    torch.manual_seed(0)
    objects = training_objects(task)
    codec = _fresh_codec(task, objects)
    losses = train_vae(codec.vae, codec.tensorize(objects), epochs=epochs, on_epoch=on_epoch)
    meta = {"task": task, "epochs": epochs, "losses": losses, "n_train": len(objects)}
    save_vae(codec, path, meta)
    return codec, meta
