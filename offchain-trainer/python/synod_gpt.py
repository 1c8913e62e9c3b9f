"""The PyTorch twin of synod-model's GPT (offchain-trainer/model/src/gpt.rs).

Same layout and state-dict names as nanoGPT's model.py (pre-LayerNorm blocks with biases,
causal scaled_dot_product_attention, tanh-free GELU, output projection tied to
transformer.wte.weight), so a Synod checkpoint loads with `load_state_dict` by name.
Used by the interop test and by the throughput benchmark's PyTorch baseline.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, n_head, n_layer):
        super().__init__()
        self.n_head = n_head
        self.ln_1 = nn.LayerNorm(d)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(d, 3 * d)
        self.attn.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(d, 4 * d)
        self.mlp.c_proj = nn.Linear(4 * d, d)
        proj_std = 0.02 / math.sqrt(2 * n_layer)
        for lin, std in [(self.attn.c_attn, 0.02), (self.attn.c_proj, proj_std), (self.mlp.c_fc, 0.02), (self.mlp.c_proj, proj_std)]:
            nn.init.normal_(lin.weight, 0.0, std)
            nn.init.zeros_(lin.bias)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.attn.c_attn(self.ln_1(x)).split(c, dim=2)
        heads = lambda z: z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        x = x + self.attn.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=256, ctx=64, n_layer=4, n_head=4, d_model=128):
        super().__init__()
        self.transformer = nn.Module()
        self.transformer.wte = nn.Embedding(vocab, d_model)
        self.transformer.wpe = nn.Embedding(ctx, d_model)
        self.transformer.h = nn.ModuleList([Block(d_model, n_head, n_layer) for _ in range(n_layer)])
        self.transformer.ln_f = nn.LayerNorm(d_model)
        nn.init.normal_(self.transformer.wte.weight, 0.0, 0.02)
        nn.init.normal_(self.transformer.wpe.weight, 0.0, 0.02)

    def forward(self, idx, targets=None):
        t = idx.shape[1]
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(t, device=idx.device))
        for block in self.transformer.h:
            x = block(x)
        logits = self.transformer.ln_f(x) @ self.transformer.wte.weight.T
        if targets is None:
            return logits
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    def optimizer(self, lr, betas, weight_decay):
        """AdamW with decay on matrices/embeddings only, as synod-model's optimizer groups."""
        decay = [p for p in self.parameters() if p.dim() >= 2]
        no_decay = [p for p in self.parameters() if p.dim() < 2]
        return torch.optim.AdamW(
            [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=lr, betas=betas, foreach=False)
