"""Diffusion-LM decoding: a small masked-diffusion LM (transformers Llama, bidirectional, ``[MASK]``), its
LLaDA SFT trainer, a K/V cache that writes at arbitrary positions, and independent commit and cache rules
for semi-autoregressive block decoding (LLaDA, Fast-dLLM, Polestar). Extra ``llm`` (transformers ≥ 5).

Layers: :mod:`.tasks` (generated exact-match tasks, char tokenizer), :mod:`.model` (model, forward, SFT,
cached trainer), :mod:`.kvcache` (``DiffusionKVCache``), :mod:`.commit` (commit rules), :mod:`.cache`
(cache rules), :mod:`.decode` (``decode``).
"""

from .cache import CacheRule, DLLMCache, DualCache, ElasticCache, NoCache, PolestarCache, PrefixCache, drift_trace
from .commit import CommitRule, Factor, LowConfidence, PolestarCommit, Threshold
from .decode import DecodeResult, decode
from .kvcache import DiffusionKVCache
from .model import ModelConfig, TrainConfig, build_model, forward, heldout_examples, llada_sft_loss, pretrained_dllm, train_dllm
from .tasks import TASKS, TOKENIZER, CharTokenizer, Example, encode_batch, exact_match, make_examples

__all__ = [
    "CacheRule", "NoCache", "PrefixCache", "DualCache", "PolestarCache", "ElasticCache", "DLLMCache", "DiffusionKVCache", "drift_trace",
    "CommitRule", "LowConfidence", "Threshold", "Factor", "PolestarCommit", "DecodeResult", "decode",
    "ModelConfig", "TrainConfig", "build_model", "forward", "llada_sft_loss", "train_dllm", "pretrained_dllm",
    "heldout_examples", "TASKS", "TOKENIZER", "CharTokenizer", "Example", "encode_batch", "exact_match", "make_examples",
]
