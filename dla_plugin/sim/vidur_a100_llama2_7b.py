"""Profiled operator timings of Llama-2-7B on one A100 80 GB (tensor parallelism 1), the
rows :mod:`dla_plugin.sim.steptime` builds its ``a100-llama2-7b`` step model from.

Source: Vidur, "A Large-Scale Simulation Framework for LLM Inference" (Microsoft, MIT
licence), its profiling tables ``data/profiling/compute/a100/meta-llama/Llama-2-7b-hf/``:

- :data:`LINEAR` from ``mlp.csv`` (repository ``microsoft/vidur``, commit ``bee57da``): rows
  with ``num_tensor_parallel_workers`` 1, the median (``time_stats.<op>.median``, in ms) of
  each of the nine per-layer operators whose cost depends only on the tokens of the step;
- :data:`DECODE` and :data:`PREFILL` from ``attention.csv`` (the same file as Vidur ships it,
  read from the verbatim copy in ``sw5sh/cs378-assignment3`` at commit ``7ac2fe9``): rows with
  ``num_tensor_parallel_workers`` 1 and the FlashAttention backend, the median of
  ``time_stats.attn_decode`` (``is_prefill`` False) and of ``time_stats.attn_prefill``
  (``is_prefill`` True, ``kv_cache_size`` 0: a whole prompt, as a request is prefilled
  here).

The rows are copied as published; nothing is computed here. Times are per layer, in
milliseconds. They are a subset, chosen to span what the simulator asks for, not fitted:

- LINEAR: round token counts from 1 to 4,096, and the rows on both sides of the places where
  the cost jumps with the kernels' tile sizes (128 and 136, 384 and 440, 768 and 800), so that
  interpolating between rows follows the steps; ``tests/dla/test_dla_steptime.py`` checks the
  interpolation against 12 rows not used here;
- DECODE: batches of 1 to 128 over KV caches of 32 to 3,072 tokens;
- PREFILL: prompts of 64 to 3,968 tokens.
"""

from __future__ import annotations

__all__ = ["DECODE", "LAYERS", "LINEAR", "LINEAR_OPS", "PREFILL"]

#: Decoder layers of Llama-2-7B.
LAYERS = 32

#: The per-layer operators of :data:`LINEAR`, in its column order (Vidur's names).
LINEAR_OPS = (
    "input_layernorm",
    "attn_pre_proj",
    "attn_rope",
    "attn_post_proj",
    "post_attention_layernorm",
    "mlp_up_proj",
    "mlp_act",
    "mlp_down_proj",
    "add",
)

#: ``(num_tokens, median ms of each op in LINEAR_OPS)``, rows of mlp.csv.
LINEAR: tuple[tuple[int, tuple[float, ...]], ...] = (
    (1, (0.005, 0.065, 0.005, 0.025, 0.005, 0.116, 0.007, 0.06, 0.002)),
    (32, (0.004, 0.066, 0.006, 0.027, 0.005, 0.115, 0.008, 0.065, 0.002)),
    (64, (0.004, 0.067, 0.006, 0.027, 0.005, 0.116, 0.008, 0.068, 0.002)),
    (128, (0.005, 0.0745, 0.007, 0.032, 0.005, 0.157, 0.011, 0.088, 0.003)),
    (136, (0.005, 0.132, 0.01, 0.038, 0.005, 0.205, 0.0125, 0.139, 0.003)),
    (384, (0.009, 0.169, 0.016, 0.066, 0.009, 0.292, 0.026, 0.144, 0.0055)),
    (440, (0.012, 0.228, 0.019, 0.086, 0.012, 0.3955, 0.034, 0.204, 0.006)),
    (768, (0.017, 0.34, 0.025, 0.115, 0.017, 0.5695, 0.053, 0.292, 0.01)),
    (800, (0.018, 0.369, 0.03, 0.133, 0.017, 0.689, 0.054, 0.407, 0.01)),
    (1024, (0.022, 0.475, 0.038, 0.176, 0.022, 0.877, 0.07, 0.431, 0.012)),
    (1280, (0.027, 0.5955, 0.045, 0.187, 0.027, 0.951, 0.0845, 0.478, 0.015)),
    (1536, (0.036, 0.756, 0.057, 0.251, 0.037, 1.193, 0.105, 0.638, 0.02)),
    (2048, (0.053, 0.979, 0.076, 0.301, 0.055, 1.694, 0.135, 0.851, 0.028)),
    (2560, (0.068, 1.197, 0.094, 0.36, 0.068, 2.118, 0.168, 0.93, 0.035)),
    (4000, (0.103, 1.91, 0.146, 0.596, 0.102, 3.3655, 0.26, 1.604, 0.054)),
    (4096, (0.105, 1.911, 0.149, 0.611, 0.104, 3.3655, 0.266, 1.604, 0.055)),
)

#: ``(batch_size, kv_cache_size, median ms of attn_decode)``, rows of attention.csv.
DECODE: tuple[tuple[int, int, float], ...] = (
    (1, 32, 0.009),
    (8, 32, 0.018),
    (16, 32, 0.028),
    (32, 32, 0.048),
    (64, 32, 0.097),
    (128, 224, 0.306),
    (1, 256, 0.012),
    (8, 256, 0.041),
    (16, 256, 0.072),
    (32, 256, 0.114),
    (48, 256, 0.159),
    (64, 256, 0.203),
    (8, 1024, 0.119),
    (16, 1024, 0.187),
    (32, 1024, 0.324),
    (48, 1024, 0.470),
    (64, 1024, 0.602),
    (80, 1024, 0.728),
    (128, 1664, 1.752),
    (1, 1728, 0.025),
    (8, 1728, 0.184),
    (16, 1728, 0.291),
    (32, 1728, 0.519),
    (48, 1728, 0.791),
    (64, 1728, 1.017),
    (90, 3008, 2.355),
    (96, 3008, 2.475),
    (100, 3008, 2.557),
    (110, 3008, 2.775),
    (120, 3008, 2.984),
    (128, 3008, 3.161),
    (1, 3072, 0.046),
    (8, 3072, 0.31),
    (16, 3072, 0.51),
    (32, 3072, 0.946),
    (48, 3072, 1.381),
)

#: ``(prefill_chunk_size, median ms of attn_prefill)`` at kv_cache_size 0, rows of attention.csv.
PREFILL: tuple[tuple[int, float], ...] = (
    (64, 0.015),
    (80, 0.015),
    (544, 0.125),
    (928, 0.246),
    (1920, 0.699),
    (1984, 0.748),
    (2944, 1.488),
    (3008, 1.526),
    (3584, 2.113),
    (3648, 2.219),
    (3712, 2.255),
    (3776, 2.372),
    (3840, 2.395),
    (3904, 2.565),
    (3968, 2.592),
)
