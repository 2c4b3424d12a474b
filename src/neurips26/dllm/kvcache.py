"""``DiffusionKVCache``: a ``transformers.Cache`` holding K/V for every position of a diffusion LM's sequence.

Its ``update`` *writes* the new K/V at the positions of the current forward (``write_positions``, the role
of Fast-dLLM's ``replace_position``) and returns the K/V of all positions, so a forward over a subset of
positions attends over the whole sequence. A forward without ``write_positions`` (re)fills the cache.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, CacheLayerMixin

__all__ = ["DiffusionKVCache"]


class _Layer(CacheLayerMixin):
    is_compileable = False
    is_sliding = False

    def __init__(self, owner: "DiffusionKVCache"):
        super().__init__()
        self._owner = owner

    def lazy_initialization(self, key_states, value_states) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        self.is_initialized = True

    def update(self, key_states, value_states, *args, **kwargs):
        pos = self._owner.write_positions
        if pos is None:
            self.lazy_initialization(key_states, value_states)
            self.keys, self.values = key_states, value_states
        else:
            if not self.is_initialized:
                raise RuntimeError("DiffusionKVCache: a sparse write before the cache was filled by a full forward")
            self.keys[:, :, pos] = key_states
            self.values[:, :, pos] = value_states
        return self.keys, self.values

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return (self.keys.shape[-2] if self.is_initialized else query_length), 0

    def get_seq_length(self) -> int:
        return self.keys.shape[-2] if self.is_initialized else 0

    def get_max_length(self) -> int:
        return -1


class DiffusionKVCache(Cache):
    """Per-layer K/V (B, H, N, D) for all N positions. Set ``write_positions`` (a (n,) LongTensor) before a
    forward over the tokens at those positions (``neurips26.dllm.model.forward`` does it)."""

    def __init__(self, num_layers: int):
        self.write_positions: torch.Tensor | None = None
        super().__init__(layers=[_Layer(self) for _ in range(num_layers)])

    @property
    def seq_length(self) -> int:
        return self.layers[0].get_seq_length()

    def get_query_offset(self, layer_idx: int = 0) -> int:
        return 0

    def clone(self) -> "DiffusionKVCache":
        new = DiffusionKVCache(len(self.layers))
        for a, b in zip(self.layers, new.layers):
            if a.is_initialized:
                b.lazy_initialization(a.keys, a.values)
                b.keys, b.values = a.keys.clone(), a.values.clone()
        return new
