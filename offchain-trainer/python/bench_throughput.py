"""PyTorch baseline of `synod-trainer bench throughput`: the same GPT (synod_gpt.GPT), batch,
threads and inner step (forward, cross-entropy, backward, global-norm clip 1.0, AdamW with the
same decay groups, loss.item()) on random windows of the same corpus. Prints one JSON line.
"""
import argparse
import json
import time

import numpy as np
import torch

from synod_gpt import GPT

p = argparse.ArgumentParser()
p.add_argument("--config", required=True, help='{"vocab":..,"ctx":..,"n_layer":..,"n_head":..,"d_model":..}')
p.add_argument("--data", required=True)
p.add_argument("--batch", type=int, default=12)
p.add_argument("--seq-len", type=int, default=64)
p.add_argument("--steps", type=int, default=30)
p.add_argument("--warmup", type=int, default=5)
p.add_argument("--threads", type=int, default=1)
a = p.parse_args()

torch.set_num_threads(a.threads)
torch.manual_seed(0)
cfg = json.loads(a.config)
data = np.frombuffer(open(a.data, "rb").read(), dtype=np.uint8)
data = data[: len(data) * 9 // 10]
rng = np.random.default_rng(0)
model = GPT(cfg["vocab"], cfg["ctx"], cfg["n_layer"], cfg["n_head"], cfg["d_model"])
opt = model.optimizer(1e-3, (0.9, 0.99), 0.1)
B, T = a.batch, a.seq_len


def step():
    ix = rng.integers(0, len(data) - T - 1, B)
    x = torch.from_numpy(np.stack([data[i : i + T] for i in ix]).astype(np.int64))
    y = torch.from_numpy(np.stack([data[i + 1 : i + T + 1] for i in ix]).astype(np.int64))
    _, loss = model(x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item()


for _ in range(a.warmup):
    step()
t0 = time.perf_counter()
for _ in range(a.steps):
    step()
dt = time.perf_counter() - t0
print(json.dumps({"tokens_per_s": B * T * a.steps / dt, "secs": dt, "torch": torch.__version__, "threads": torch.get_num_threads()}))
