"""W4A8 for MoE experts: MXFP4 weights (4.25 bits stored), FP8 (e4m3) activations, FP8
matmuls: one grouped GEMM per projection over all routed tokens
(``torch._scaled_grouped_mm`` on sm90+ GPUs), a per-expert ``torch._scaled_mm`` loop elsewhere
(the CPU included).

FP8 matmuls take one scale per row of each operand, while MXFP4 has one per block of 32
along the reduction dimension. The block scales are powers of two, so they fold into the
FP8 values: a weight row keeps its largest block exponent e_row as the row scale and each
element becomes e2m1 · 2^(e_block − e_row) in e4m3. E2M1 values have at most two significant
bits, so this is exact as long as e_block − e_row ≥ −8 (e4m3's smallest subnormal step is
2^-9); blocks more than 8 binades below their row's largest round to e4m3 (their elements
are then below 2^-8 of the row's magnitude). Activations are quantized per token to e4m3
with a dynamic scale amax / 448.

``W4A8Experts`` replaces a transformers-5 fused experts module (``gate_up_proj`` (E, 2I, H),
``down_proj`` (E, H, I)) and keeps its forward signature. The forward sorts the (token, slot)
pairs by expert and computes the group ends on the device (``searchsorted``), so it has no
``.item()``, ``.tolist()``, ``nonzero()`` or data-dependent shape on the grouped path (a
decode step can be captured in a CUDA graph); the per-expert fallback reads the group ends on
the host, which costs nothing on the CPU. With ``cache_fp8=True`` the folded FP8 weights are
kept (8 bits + one scale per row: the fast path); with False only the packed MXFP4 data is
kept and the experts the step routes to are unfolded to FP8 on every call (gathered into at
most min(E, routed pairs) slots without a host sync). Optional low-rank adapters
(y += (x Aₑᵀ) Bₑᵀ, in the activations' precision) run grouped as well: two grouped matmuls per
projection (``torch.nn.functional.grouped_mm``), never one small matmul per expert.
``check_inputs`` validates the routing indices and refuses non-finite activations (host syncs:
on in tests, off in the hot path).
"""

from __future__ import annotations

import logging
import numbers

import torch

from ..moe import find_moe_blocks
from .mxfp4 import E2M1_VALUES, MXFP4Tensor, quantize_mxfp4

__all__ = ["FP8_MAX", "mxfp4_to_fp8", "quantize_fp8_rows", "w4a8_matmul", "route_groups", "grouped_fp8_matmul",
           "grouped_matmul", "fp8_grouped_mm_supported", "W4A8Experts", "quantize_moe_w4a8"]

FP8_MAX = 448.0  # largest finite float8_e4m3fn


class _TorchaoKernelNote(logging.Filter):
    """torchao, which transformers imports when it builds a model, logs "Failed to load
    .../torchao/_C_*.so" for each optional CUDA kernel a CPU build cannot load; the message says
    nothing about our results, so it is dropped. Every other torchao record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        return not (msg.startswith("Failed to load") and "torchao" in msg and ".so" in msg)


_torchao_logger = logging.getLogger("torchao")
if not any(isinstance(f, _TorchaoKernelNote) for f in _torchao_logger.filters):
    _torchao_logger.addFilter(_TorchaoKernelNote())


_E2M1_GRIDS: dict = {}


def _fold_fp8(packed: torch.Tensor, codes: torch.Tensor, block: int, cols: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Device-side fold of packed MXFP4 rows (…, N, bytes) / scale codes (…, N, blocks) into
    (W8 (…, N, cols) e4m3, row scale (…, N, 1) float32), no host sync. e2m1 · 2^(e_block − e_row)
    is exact in float32 down to 2^-126 and everything below rounds to 0 in e4m3 anyway, so this
    equals the float64 arithmetic of the specification."""
    key = str(packed.device)
    if key not in _E2M1_GRIDS:  # made once per device: a host-to-device copy per call would sync
        _E2M1_GRIDS[key] = torch.tensor(E2M1_VALUES + tuple(-v for v in E2M1_VALUES), dtype=torch.float32,
                                        device=packed.device)
    grid = _E2M1_GRIDS[key]
    vals = torch.stack([grid[(packed & 0xF).long()], grid[(packed >> 4).long()]], dim=-1)
    exps = codes.to(torch.int32) - 127
    row_exp = exps.amax(dim=-1, keepdim=True)
    d = exps - row_exp  # ≤ 0
    step = torch.where(d >= -126, ((d.clamp_min(-126) + 127) << 23).view(torch.float32), 0.0)
    w = (vals.reshape(*codes.shape, block) * step[..., None]).reshape(*codes.shape[:-1], -1)[..., :cols]
    scale = torch.where(row_exp >= -126, ((row_exp.clamp_min(-126) + 127) << 23).view(torch.float32),
                        torch.exp2(row_exp.to(torch.float32)))
    return w.to(torch.float8_e4m3fn), scale


def mxfp4_to_fp8(t: MXFP4Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(W8, row scale): W8 (…, N, K) float8_e4m3fn and a float32 (…, N, 1) power of two with
    W8 · scale equal to ``t.dequantize()`` (module docstring for the exact range)."""
    if not isinstance(t, MXFP4Tensor):
        raise TypeError(f"t must be an MXFP4Tensor, got {type(t).__name__}")
    if (t.scales == 255).any():
        raise ValueError("the MXFP4 tensor has NaN scales (code 255): its source had non-finite values")
    if t.scales.numel() == 0:
        return torch.zeros(t.shape, dtype=torch.float8_e4m3fn, device=t.packed.device), \
            torch.ones(*t.shape[:-1], 1, dtype=torch.float32, device=t.packed.device)
    return _fold_fp8(t.packed, t.scales, t.block, t.shape[-1])


def quantize_fp8_rows(x: torch.Tensor, check: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row dynamic e4m3 quantization of a 2-D ``x``: (x8, scale (M, 1) float32), x ≈ x8 · scale.
    An empty ``x`` gives an empty x8 and scales of 1; NaN or inf values are refused when
    ``check`` (a host sync; the experts' hot path passes False)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim != 2:
        raise ValueError(f"x: expected a 2-D activation matrix, got shape {tuple(x.shape)}")
    if x.shape[1] == 0:
        return x.to(torch.float8_e4m3fn), torch.ones(x.shape[0], 1, dtype=torch.float32, device=x.device)
    amax = x.abs().amax(dim=1, keepdim=True).to(torch.float32)
    if check and not torch.isfinite(amax).all():
        raise ValueError("x (the activations) holds NaN or inf values")
    scale = torch.where(amax > 0, amax / FP8_MAX, torch.ones_like(amax))
    return (x.to(torch.float32) / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale


def w4a8_matmul(x: torch.Tensor, w8: torch.Tensor, w_scale: torch.Tensor,
                out_dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """x (M, K) @ W.T for W = w8 · w_scale (N, K): x quantized per row to e4m3, one FP8 matmul."""
    if not isinstance(w8, torch.Tensor) or w8.dtype != torch.float8_e4m3fn or w8.ndim != 2:
        got = f"{w8.dtype} {tuple(w8.shape)}" if isinstance(w8, torch.Tensor) else type(w8).__name__
        raise TypeError(f"w8 must be a 2-D float8_e4m3fn tensor (N, K) (from mxfp4_to_fp8), got {got}")
    if isinstance(x, torch.Tensor) and x.ndim == 2 and x.shape[1] != w8.shape[1]:
        raise ValueError(f"x (M, K) and w8 (N, K) disagree on K: x {tuple(x.shape)}, w8 {tuple(w8.shape)}")
    if not isinstance(w_scale, torch.Tensor) or w_scale.numel() != w8.shape[0] or w_scale.dtype != torch.float32:
        got = f"{w_scale.dtype} {tuple(w_scale.shape)}" if isinstance(w_scale, torch.Tensor) else type(w_scale).__name__
        raise ValueError(f"w_scale must be float32 with one scale per row of w8 ({w8.shape[0]}, 1), got {got}")
    x8, x_scale = quantize_fp8_rows(x)
    return torch._scaled_mm(x8, w8.t(), scale_a=x_scale, scale_b=w_scale.reshape(1, -1), out_dtype=out_dtype)


# --- grouped matmuls over tokens sorted by expert ---------------------------------------------

def route_groups(top_k_index: torch.Tensor, num_groups: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sort the routed (token, slot) pairs by expert, on the device: (order, sorted experts, ends).
    ``order`` (T·k,) indexes the flattened (T, k) routing (token = order // k), the sorted
    experts are ``top_k_index.flatten()[order]`` (stable, so tokens stay in order within an
    expert), and ``ends`` (num_groups,) int32 holds each expert's group end, the ``offs`` of
    torch's grouped matmuls."""
    flat = top_k_index.reshape(-1)
    experts, order = torch.sort(flat, stable=True)
    ids = torch.arange(num_groups, device=flat.device, dtype=experts.dtype)
    ends = torch.searchsorted(experts, ids, right=True).to(torch.int32)
    return order, experts, ends


def fp8_grouped_mm_supported(device: torch.device) -> bool:
    """Whether ``torch._scaled_grouped_mm`` runs on ``device`` (CUDA sm90+)."""
    return (device.type == "cuda" and hasattr(torch, "_scaled_grouped_mm")
            and torch.cuda.get_device_capability(device) >= (9, 0))


def _bf16_grouped_mm_supported(device: torch.device, dtype: torch.dtype) -> bool:
    if not hasattr(torch.nn.functional, "grouped_mm") or dtype != torch.bfloat16:
        return False
    return device.type == "cpu" or (device.type == "cuda" and torch.cuda.get_device_capability(device) >= (8, 0))


def grouped_fp8_matmul(x8: torch.Tensor, x_scale: torch.Tensor, w8: torch.Tensor, w_scale: torch.Tensor,
                       ends: torch.Tensor, out_dtype: torch.dtype = torch.bfloat16,
                       grouped: bool | None = None) -> torch.Tensor:
    """Rows of x8 (M, K) e4m3 sorted into groups ending at ``ends`` (G,), each times its
    W_g = w8[g] · w_scale[g] (w8 (G, N, K), w_scale (G, N, 1)): (M, N) in ``out_dtype``, rows
    past ``ends[-1]`` zero. ``grouped`` (default: where supported) takes one
    ``torch._scaled_grouped_mm``, which gives bfloat16 (cast to ``out_dtype``); otherwise one
    ``torch._scaled_mm`` per non-empty group (the group ends read on the host)."""
    if grouped is None:
        grouped = fp8_grouped_mm_supported(x8.device)
    G, N, _ = w8.shape
    if grouped:
        out = torch._scaled_grouped_mm(x8, w8.transpose(-2, -1), x_scale.reshape(-1), w_scale.reshape(G, N),
                                       offs=ends, out_dtype=torch.bfloat16)
        if out.shape[0]:  # the kernel leaves rows past the last group unwritten
            rows = torch.arange(out.shape[0], device=out.device)[:, None]
            out = torch.where(rows < ends[-1], out, 0)
        return out.to(out_dtype)
    out = torch.zeros(x8.shape[0], N, dtype=out_dtype, device=x8.device)
    start = 0
    for g, end in enumerate(ends.tolist()):
        if end > start:
            out[start:end] = torch._scaled_mm(x8[start:end], w8[g].t(), scale_a=x_scale[start:end],
                                              scale_b=w_scale[g].reshape(1, -1), out_dtype=out_dtype)
        start = end
    return out


def grouped_matmul(x: torch.Tensor, w: torch.Tensor, ends: torch.Tensor, grouped: bool | None = None) -> torch.Tensor:
    """Rows of x (M, K) in groups ending at ``ends``, each times w[g]ᵀ (w (G, N, K)): (M, N),
    rows past ``ends[-1]`` zero. ``torch.nn.functional.grouped_mm`` where it runs (bfloat16 on
    the CPU and sm80+ GPUs), else one matmul per non-empty group."""
    if grouped is None:
        grouped = _bf16_grouped_mm_supported(x.device, x.dtype) and w.dtype == x.dtype
    if grouped:
        out = torch.nn.functional.grouped_mm(x, w.transpose(-2, -1), offs=ends)
        if out.shape[0]:  # the kernel leaves rows past the last group unwritten
            rows = torch.arange(out.shape[0], device=out.device)[:, None]
            out = torch.where(rows < ends[-1], out, 0)
        return out
    out = torch.zeros(x.shape[0], w.shape[1], dtype=torch.promote_types(x.dtype, w.dtype), device=x.device)
    start = 0
    for g, end in enumerate(ends.tolist()):
        if end > start:
            out[start:end] = x[start:end] @ w[g].T
        start = end
    return out


def _compact_groups(experts: torch.Tensor, num_experts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The distinct sorted experts in S = min(E, M) slots without a host sync: (slot experts
    (S,), slot ends (S,) int32). Slots past the number of distinct experts repeat expert 0 with
    empty groups."""
    M = experts.shape[0]
    S = min(num_experts, M)
    first = torch.ones(M, dtype=torch.bool, device=experts.device)
    first[1:] = experts[1:] != experts[:-1]
    slot = torch.cumsum(first, 0) - 1  # each row's slot
    hit = torch.zeros(S, dtype=experts.dtype, device=experts.device).scatter_(0, slot, experts)
    ends = torch.searchsorted(slot, torch.arange(S, device=slot.device, dtype=slot.dtype), right=True)
    return hit, ends.to(torch.int32)


class W4A8Experts(torch.nn.Module):
    """Drop-in for a fused experts module, with MXFP4 weights and FP8 activations.

    ``adapters``: optional low-rank adapters per projection, ``{"gate_up_proj": (B, A),
    "down_proj": (B, A)}`` with B (E, out, r) and A (E, r, in) (the order of
    ``moe_quant.low_rank_compensation``), stored in the module's output dtype with the rank
    padded by zeros to a multiple of 8.
    ``grouped``: None picks per device (grouped FP8 GEMM on sm90+, the per-expert loop elsewhere);
    True / False forces it (the CPU has no grouped FP8 kernel)."""

    def __init__(self, experts: torch.nn.Module, cache_fp8: bool = True, out_dtype: torch.dtype | None = None,
                 adapters: dict | None = None, check_inputs: bool = False, grouped: bool | None = None):
        super().__init__()
        if not all(isinstance(getattr(experts, n, None), torch.Tensor) for n in ("gate_up_proj", "down_proj")) \
                or not callable(getattr(experts, "act_fn", None)):
            raise TypeError(f"experts must be a fused experts module (gate_up_proj (E, 2I, H), down_proj (E, H, I), "
                            f"act_fn), got {type(experts).__name__}")
        gate_up, down = experts.gate_up_proj.detach(), experts.down_proj.detach()
        if gate_up.ndim != 3 or down.ndim != 3 or gate_up.shape[0] != down.shape[0]:
            raise ValueError(f"expected fused experts gate_up_proj (E, 2I, H) and down_proj (E, H, I), got "
                             f"{tuple(gate_up.shape)} and {tuple(down.shape)}")
        for name, w in (("gate_up_proj", gate_up), ("down_proj", down)):
            if w.shape[-1] % 32 or w.shape[-2] % 16:
                raise ValueError(f"{name} {tuple(w.shape)}: FP8 matmuls need the reduction dim a multiple of 32 "
                                 "(MXFP4 blocks) and the output dim a multiple of 16")
            if not torch.isfinite(w).all():
                raise ValueError(f"{name} holds NaN or inf values: their MXFP4 blocks would be NaN")
        for name, flag in (("cache_fp8", cache_fp8), ("check_inputs", check_inputs)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be a bool, got {flag!r}")
        if grouped is not None and not isinstance(grouped, bool):
            raise TypeError(f"grouped must be None or a bool, got {grouped!r}")
        self.num_experts = gate_up.shape[0]
        self.act_fn = experts.act_fn
        self.cache_fp8 = cache_fp8
        self.check_inputs = check_inputs
        self.grouped = grouped
        self.out_dtype = out_dtype or gate_up.dtype
        self._layout = {}
        for key, w in (("gate_up", gate_up), ("down", down)):
            t = quantize_mxfp4(w.float())
            self._layout[key] = (tuple(t.shape[1:]), t.block)
            if cache_fp8:  # keep only the folded copy the matmuls read
                w8, scale = mxfp4_to_fp8(t)
                self.register_buffer(f"{key}_w8", w8)
                self.register_buffer(f"{key}_scale", scale)
            else:
                self.register_buffer(f"{key}_packed", t.packed)
                self.register_buffer(f"{key}_codes", t.scales)
        self.has_adapters = adapters is not None
        if adapters is not None:
            self._set_adapters(adapters, {"gate_up": gate_up.shape, "down": down.shape}, gate_up.device)

    def _set_adapters(self, adapters, shapes, device):
        if not isinstance(adapters, dict) or set(adapters) != {"gate_up_proj", "down_proj"}:
            raise ValueError(f"adapters must be a dict with keys 'gate_up_proj' and 'down_proj', each (B, A), got "
                             f"{sorted(adapters) if isinstance(adapters, dict) else type(adapters).__name__}")
        for key, pname in (("gate_up", "gate_up_proj"), ("down", "down_proj")):
            E, out, inp = shapes[key]
            try:
                B, A = adapters[pname]
            except (TypeError, ValueError):
                raise ValueError(f"adapters[{pname!r}] must be a pair (B, A)") from None
            if not (isinstance(B, torch.Tensor) and isinstance(A, torch.Tensor) and B.ndim == 3 and A.ndim == 3
                    and B.is_floating_point() and A.is_floating_point()):
                raise ValueError(f"adapters[{pname!r}]: B and A must be 3-D float tensors")
            r = A.shape[1]
            if tuple(B.shape) != (E, out, r) or tuple(A.shape) != (E, r, inp):
                raise ValueError(f"adapters[{pname!r}]: need B (E, out, r) = ({E}, {out}, r) and A (E, r, in) = "
                                 f"({E}, r, {inp}) with one r, got B {tuple(B.shape)} and A {tuple(A.shape)}")
            if not (torch.isfinite(B).all() and torch.isfinite(A).all()):
                raise ValueError(f"adapters[{pname!r}] hold NaN or inf values")
            # the rank padded with zeros to a multiple of 8 (exact): grouped GEMMs want 16-byte strides
            pad = (-r) % 8
            A = torch.nn.functional.pad(A.detach().to(device=device, dtype=self.out_dtype), (0, 0, 0, pad))
            B = torch.nn.functional.pad(B.detach().to(device=device, dtype=self.out_dtype), (0, pad))
            self.register_buffer(f"{key}_A", A.contiguous())
            self.register_buffer(f"{key}_B", B.contiguous())

    def _weights(self, key: str, e: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Expert e's (W8, row scale) (the per-expert form, kept for tests and callers)."""
        if self.cache_fp8:
            return getattr(self, f"{key}_w8")[e], getattr(self, f"{key}_scale")[e]
        shape, block = self._layout[key]
        return mxfp4_to_fp8(MXFP4Tensor(getattr(self, f"{key}_packed")[e], getattr(self, f"{key}_codes")[e], shape, block))

    def storage_bytes(self) -> int:
        return sum(b.numel() * b.element_size() for b in self.buffers())

    def _check(self, hidden_states, top_k_index, top_k_weights):
        if not (isinstance(hidden_states, torch.Tensor) and hidden_states.ndim == 2):
            raise ValueError(f"hidden_states must be (tokens, hidden), got {getattr(hidden_states, 'shape', None)}")
        if not (isinstance(top_k_index, torch.Tensor) and top_k_index.ndim == 2
                and top_k_index.shape[0] == hidden_states.shape[0] and not top_k_index.is_floating_point()):
            raise ValueError(f"top_k_index must be an integer (tokens, k) tensor for {hidden_states.shape[0]} tokens, "
                             f"got {getattr(top_k_index, 'dtype', None)} {tuple(getattr(top_k_index, 'shape', ()))}")
        if not (isinstance(top_k_weights, torch.Tensor) and top_k_weights.shape == top_k_index.shape):
            raise ValueError(f"top_k_weights must have top_k_index's shape {tuple(top_k_index.shape)}")
        if top_k_index.numel() and (top_k_index.min() < 0 or top_k_index.max() >= self.num_experts):
            raise ValueError(f"top_k_index holds experts outside [0, {self.num_experts})")
        if not torch.isfinite(hidden_states).all():
            raise ValueError("hidden_states (the activations) hold NaN or inf values")

    def _project(self, key: str, x: torch.Tensor, x8: torch.Tensor, x_scale: torch.Tensor, experts: torch.Tensor,
                 ends: torch.Tensor) -> torch.Tensor:
        if self.cache_fp8:
            w8, ws, g_ends = getattr(self, f"{key}_w8"), getattr(self, f"{key}_scale"), ends
        else:  # unfold only the routed experts, into min(E, M) slots
            hit, g_ends = _compact_groups(experts, self.num_experts)
            shape, block = self._layout[key]
            w8, ws = _fold_fp8(getattr(self, f"{key}_packed")[hit], getattr(self, f"{key}_codes")[hit], block, shape[-1])
        y = grouped_fp8_matmul(x8, x_scale, w8, ws, g_ends, self.out_dtype, self.grouped)
        if self.has_adapters:
            t = grouped_matmul(x.to(self.out_dtype), getattr(self, f"{key}_A"), ends)
            y = y + grouped_matmul(t, getattr(self, f"{key}_B"), ends).to(y.dtype)
        return y

    def forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor):
        if self.check_inputs:
            self._check(hidden_states, top_k_index, top_k_weights)
        k = top_k_index.shape[-1]
        order, experts, ends = route_groups(top_k_index, self.num_experts)
        tokens = order // k
        # per-token activation scales: each token is quantized once, its rows gathered
        h8, h_scale = quantize_fp8_rows(hidden_states, check=False)
        x = hidden_states[tokens] if self.has_adapters else None
        gate_up = self._project("gate_up", x, h8[tokens], h_scale[tokens], experts, ends)
        gate, up = gate_up.chunk(2, dim=-1)
        a = self.act_fn(gate) * up
        a8, a_scale = quantize_fp8_rows(a, check=False)
        h = self._project("down", a, a8, a_scale, experts, ends)
        w = top_k_weights.reshape(-1)[order]
        return torch.zeros_like(hidden_states).index_add_(0, tokens, (h * w[:, None]).to(hidden_states.dtype))


def quantize_moe_w4a8(model: torch.nn.Module, cache_fp8: bool = True, adapter_rank: int | None = None,
                      check_inputs: bool = False, grouped: bool | None = None, seed: int = 0) -> list[str]:
    """Replace every MoE block's fused experts by :class:`W4A8Experts`, in place; returns the
    block names. Routers, attention and shared experts stay in the model's precision.
    ``adapter_rank``: give every expert random rank-r adapters (B, A ~ N(0, 1/in), seeded), the
    cost a served model with compensation adapters pays; None for none."""
    if adapter_rank is not None and (isinstance(adapter_rank, bool) or not isinstance(adapter_rank, numbers.Integral)
                                     or adapter_rank < 1):
        raise ValueError(f"adapter_rank must be None or a positive int, got {adapter_rank!r}")
    blocks = find_moe_blocks(model)
    g = torch.Generator().manual_seed(seed)
    for b in blocks:
        adapters = None
        if adapter_rank is not None:
            adapters = {}
            for pname in ("gate_up_proj", "down_proj"):
                E, out, inp = getattr(b.experts, pname).shape
                r = int(adapter_rank)
                adapters[pname] = (torch.randn(E, out, r, generator=g) * inp**-0.5,
                                   torch.randn(E, r, inp, generator=g) * inp**-0.5)
        b.module.experts = W4A8Experts(b.experts, cache_fp8=cache_fp8, adapters=adapters, check_inputs=check_inputs,
                                       grouped=grouped)
    return [b.name for b in blocks]
