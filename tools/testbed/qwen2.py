"""A Qwen2-architecture causal LM in plain PyTorch (1.13, CPU), written to match the engine's forward
(src/model/forward.cpp) and Hugging Face's Qwen2ForCausalLM:

  x = embed[tokens]
  per layer:  h = rmsnorm(x) ; q,k,v = h Wq + bq, h Wk + bk, h Wv + bv  (heads: [T, H, hd])
              RoPE "rotate half" on q and k (inv_freq_i = theta^(-2i/hd), pairs (i, i + hd/2))
              causal softmax(q k^T / sqrt(hd)) v, GQA: query head h reads kv head h // (H / Hkv)
              x += o_proj(attn)            (no o bias)
              x += down(silu(gate(rmsnorm(x))) * up(rmsnorm(x)))
  logits = lm_head(rmsnorm(x))   (lm_head tied to embed when tie_word_embeddings)

Parameter names follow HF (model.layers.N.self_attn.q_proj.weight, ...) so export is a plain rename-free dump.
"""
import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Qwen2Config:
    vocab_size: int = 512
    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 4
    max_position_embeddings: int = 2048
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = True
    # "hf": every weight N(0, 0.02), as HF initialises Qwen2 (meant for d ~ 1000s);
    # "scaled": Linear weights N(0, 1/fan_in), embeddings N(0, 1) (see Qwen2ForCausalLM._init).
    init: str = "hf"

    @property
    def head_dim(self):
        return self.hidden_size // self.num_attention_heads

    def hf_json(self, bos_id=None, eos_id=None):
        d = asdict(self)
        d.pop("init")
        d.update({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu",
                  "torch_dtype": "float32", "use_sliding_window": False})
        if bos_id is not None:
            d["bos_token_id"] = bos_id
        if eos_id is not None:
            d["eos_token_id"] = eos_id
        return d


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(hd, n, theta):
    """cos/sin tables [n, hd] for positions 0..n-1 (HF layout: the hd/2 frequencies repeated twice)."""
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    ang = torch.arange(n, dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat([ang, ang], dim=-1)
    return emb.cos().float(), emb.sin().float()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class Attention(nn.Module):
    def __init__(self, c: Qwen2Config):
        super().__init__()
        self.c = c
        hd = c.head_dim
        self.q_proj = nn.Linear(c.hidden_size, c.num_attention_heads * hd, bias=True)
        self.k_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * hd, bias=True)
        self.v_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * hd, bias=True)
        self.o_proj = nn.Linear(c.num_attention_heads * hd, c.hidden_size, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        c, hd = self.c, self.c.head_dim
        q = self.q_proj(x).view(B, T, c.num_attention_heads, hd).transpose(1, 2)  # [B, H, T, hd]
        k = self.k_proj(x).view(B, T, c.num_key_value_heads, hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, c.num_key_value_heads, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = c.num_attention_heads // c.num_key_value_heads
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(hd)  # [B, H, T, T]
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, c.num_attention_heads * hd)
        return self.o_proj(y)


class MLP(nn.Module):
    def __init__(self, c: Qwen2Config):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, c: Qwen2Config):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = MLP(c)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Inner(nn.Module):
    def __init__(self, c: Qwen2Config):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([Layer(c) for _ in range(c.num_hidden_layers)])
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)


class Qwen2ForCausalLM(nn.Module):
    def __init__(self, c: Qwen2Config):
        super().__init__()
        self.config = c
        self.model = Inner(c)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        if c.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        cos, sin = rope_tables(c.head_dim, c.max_position_embeddings, c.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.apply(self._init)

    def _init(self, m):
        # With N(0, 0.02) at d = 64..256, q.k logits start near 0 and each of W_q, W_k gets a gradient
        # scaled by the other (small) one: attention patterns are slow to leave uniform, the long plateau
        # before a copy head forms. "scaled" starts the logits at O(1).
        scaled = self.config.init == "scaled"
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=m.in_features ** -0.5 if scaled else 0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=1.0 if scaled and not self.config.tie_word_embeddings else 0.02)

    def forward(self, tokens, hide=None):
        """tokens [B, T] int64 -> logits [B, T, vocab].

        hide: an optional bool [B, T, T] (True = query position t may not attend to key position s), added
        to the causal mask: train.py's simulated eviction of chosen fact lines (testbed v2)."""
        T = tokens.shape[1]
        cos, sin = self.rope_cos[:T], self.rope_sin[:T]
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)  # True = future, masked
        if hide is not None:
            mask = (mask[None] | hide[:, :T, :T])[:, None]  # [B, 1, T, T], broadcast over heads
        x = self.model.embed_tokens(tokens)
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask)
        return self.lm_head(self.model.norm(x))

    def num_params(self):
        return sum(p.numel() for p in self.parameters())

    def hf_state_dict(self):
        """Tensors under HF names; lm_head.weight omitted when tied."""
        sd = {k: v for k, v in self.state_dict().items()}
        if self.config.tie_word_embeddings:
            sd.pop("lm_head.weight", None)
        return sd
