"""Loads a Synod checkpoint with safetensors.torch.load_file into the PyTorch GPT and writes
the logits for given token ids.

usage: interop_logits.py CHECKPOINT CONFIG_JSON TOKENS_CSV OUT_SAFETENSORS
"""
import json
import sys

import torch
from safetensors.torch import load_file, save_file

from synod_gpt import GPT

ckpt, cfg, tokens, out = sys.argv[1:5]
cfg = json.loads(cfg)
state = {k: v for k, v in load_file(ckpt).items() if not k.startswith("outer_momentum.")}
model = GPT(cfg["vocab"], cfg["ctx"], cfg["n_layer"], cfg["n_head"], cfg["d_model"])
missing, unexpected = model.load_state_dict(state, strict=True)
idx = torch.tensor([[int(t) for t in tokens.split(",")]], dtype=torch.long)
with torch.no_grad():
    logits = model(idx)
save_file({"logits": logits.contiguous()}, out)
print(json.dumps({"tensors": len(state), "logits_shape": list(logits.shape)}))
