"""Token Merging (ToMe, Bolya et al., ICLR 2023) for timm ViT blocks, written for this project.

Per block: attention runs with *proportional attention* (log of each token's size added to the
attention logits, so a token standing for k merged patches counts k times); then `r` tokens are
merged by *bipartite soft matching*: tokens alternate into sets A and B, every A token finds its
most similar B token (cosine similarity of the attention keys, averaged over heads), the `r` A
tokens with the most similar partners are merged into them (size-weighted average), and the rest
are kept. The first `protected` tokens (the class token) never merge. Unlike the reference
implementation, protected tokens are sliced off before matching (fewer ops; same result up to the
order of the kept tokens, which attention does not see).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def cpu_pad(n: int, device: torch.device) -> int:
    """Padding that brings `n` tokens to a length the CPU flash-attention kernel handles well.

    PyTorch's CPU `scaled_dot_product_attention` works in blocks of 16 queries; a partial block
    (other than a single extra token) costs nearly as much as all full blocks, e.g. 63 tokens
    take about twice as long as 64. On CPU we pad to the next multiple of 16 with masked keys."""
    rem = n % 16
    return 0 if device.type != "cpu" or rem in (0, 1) else 16 - rem


def attention_with_keys(attn: nn.Module, x: torch.Tensor, size: torch.Tensor | None,
                        want_keys: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """timm `Attention` forward with proportional attention; returns (output, keys averaged over
    heads [B, N, head_dim] if `want_keys`). `size` is [B, N, 1] token sizes or None (all ones)."""
    b, n, _ = x.shape
    pad = cpu_pad(n, x.device)
    heads, head_dim = attn.num_heads, attn.head_dim
    if pad:
        x = F.pad(x, (0, 0, 0, pad))
    qkv = attn.qkv(x).reshape(b, n + pad, 3, heads, head_dim).permute(2, 0, 3, 1, 4)
    q, k, v = qkv.unbind(0)
    q, k = attn.q_norm(q), attn.k_norm(k)
    bias = None
    if size is not None or pad:
        log_size = size.log().to(q.dtype) if size is not None else x.new_zeros(b, n, 1)
        if pad:
            log_size = F.pad(log_size, (0, 0, 0, pad), value=-torch.inf)
        bias = log_size.view(b, 1, 1, n + pad)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    out = out.transpose(1, 2).reshape(b, n + pad, heads * head_dim)
    if pad:
        out = out[:, :n]
    out = attn.proj_drop(attn.proj(attn.norm(out)))
    return out, (k[:, :, :n].mean(dim=1) if want_keys else None)


def merge_tokens(x: torch.Tensor, size: torch.Tensor | None, keys: torch.Tensor, r: int,
                 protected: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Bipartite soft matching: merge `r` tokens of `x` [B, N, C] into their most similar
    partners (size-weighted average). Returns (tokens [B, N - r, C], sizes [B, N - r, 1]).

    The first `protected` tokens take no part and stay in front; the others alternate into sets
    A (even) and B (odd); output order is protected, kept A (by similarity), then B."""
    bsz, total, c = x.shape
    n = total - protected
    r = min(r, n // 2)
    if r <= 0:
        return x, size
    with torch.no_grad():
        metric = F.normalize(keys[:, protected:], dim=-1)
        scores = metric[:, ::2] @ metric[:, 1::2].transpose(-1, -2)  # [B, |A|, |B|]
        best, best_b = scores.max(dim=-1)
        order = best.argsort(dim=-1, descending=True)  # A tokens, most similar first
        n_a, n_b = scores.shape[1], scores.shape[2]
        a_pos = protected + 2 * order
        front = torch.arange(protected, device=x.device).expand(bsz, protected)
        b_pos = (protected + 1 + 2 * torch.arange(n_b, device=x.device)).expand(bsz, n_b)
        rows = torch.arange(bsz, device=x.device)[:, None]
        keep = (torch.cat([front, a_pos[:, r:], b_pos], dim=1) + rows * total).reshape(-1)
        src = (a_pos[:, :r] + rows * total).reshape(-1)
        dst = protected + (n_a - r) + best_b.gather(1, order[:, :r])
        dst = (dst + rows * (total - r)).reshape(-1)
    # flattened index_select/index_add: several times faster on CPU than batched gather/scatter
    weighted = torch.cat([x * size, size], dim=-1) if size is not None else F.pad(x, (0, 1),
                                                                                  value=1.0)
    flat = weighted.reshape(bsz * total, c + 1)
    out = flat.index_select(0, keep).index_add_(0, dst, flat.index_select(0, src))
    out = out.view(bsz, total - r, c + 1)
    new_size = out[..., c:]
    return out[..., :c] / new_size, new_size


def block_forward(block: nn.Module, x: torch.Tensor, size: torch.Tensor | None, r: int,
                  protected: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One timm `Block` with proportional attention, then merge `r` tokens before the MLP."""
    out, keys = attention_with_keys(block.attn, block.norm1(x), size, want_keys=r > 0)
    x = x + block.drop_path1(block.ls1(out))
    if keys is not None:
        x, size = merge_tokens(x, size, keys, r, protected)
    x = x + block.drop_path2(block.ls2(block.mlp(block.norm2(x))))
    return x, size
