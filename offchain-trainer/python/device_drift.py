"""How far an honest replay drifts between device classes: one inner phase (H AdamW inner steps
from the same θ and the same batches) run on the CPU and on CUDA, compared as the verifier does
(`synod_diloco::verify::replay_distance`: ‖claimed − replayed‖ / ‖replayed‖ over the
pseudo-gradients θ − θ_H, summed in f64), raw and after the pool codec's int8 absmax
quantization (1024-element chunks, round half to even).

The reference is the CPU with all threads; the other runs are the CPU with a quarter of the
threads (the noise inside one device class), CUDA in fp32 (libtorch's default: TF32 off, as
`tch` runs it), CUDA a second time (run-to-run noise of its atomic reductions) and CUDA with
TF32 matmuls (what a member that turns TF32 on computes). The inner phase starts from θ after
`--warm` steps of plain training on the CPU (mid-training, not the initialization), with a
fresh AdamW (DiLoCo, Douillard et al. 2023, Algorithm 1), nanoGPT's peak learning rate and
gradient clip 1.0, as `synod-model`'s inner loop.

Prints one JSON line per (preset, H) and writes them to `--out` if given.

usage: device_drift.py --data CORPUS [--presets tiny,baby,small] [--inner-steps 30,100]
"""
import argparse
import json
import sys
import time

import numpy as np
import torch

from synod_gpt import GPT

PRESETS = {
    "tiny": dict(vocab=256, ctx=32, n_layer=2, n_head=2, d_model=32),
    "baby": dict(vocab=256, ctx=64, n_layer=4, n_head=4, d_model=128),
    "small": dict(vocab=256, ctx=256, n_layer=6, n_head=6, d_model=384),
}
CHUNK = 1024


def int8_absmax(x):
    """The codec's per-chunk absmax int8 round trip of a flat f32 tensor (chunks of CHUNK)."""
    n = x.numel()
    pad = (-n) % CHUNK
    c = torch.cat([x, x.new_zeros(pad)]).view(-1, CHUNK)
    s = c.abs().amax(dim=1, keepdim=True) / 127.0
    q = torch.where(s > 0, torch.round(c / torch.where(s > 0, s, 1.0)), 0.0)
    return (q * s).view(-1)[:n]


def distance(claimed, replayed):
    """replay_distance over lists of flat tensors, in f64."""
    diff = sum(float(((a.double() - b.double()) ** 2).sum()) for a, b in zip(claimed, replayed))
    norm = sum(float((b.double() ** 2).sum()) for b in replayed)
    return (diff**0.5) / (norm**0.5) if norm > 0 else diff**0.5


def inner_phase(cfg, theta, batches, device, lr, tf32=False):
    """H AdamW steps from `theta` (a CPU state dict) on `device`; the pseudo-gradients θ − θ_H
    as flat CPU f32 tensors in state-dict order."""
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    model = GPT(**cfg).to(device)
    model.load_state_dict(theta)
    opt = model.optimizer(lr, (0.9, 0.99), 0.1)
    for x, y in batches:
        _, loss = model(x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    if device != "cpu":
        torch.cuda.synchronize()
    end = model.state_dict()
    return [(theta[k] - end[k].detach().cpu()).reshape(-1).float() for k in theta]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--presets", default="tiny,baby,small")
    p.add_argument("--inner-steps", default="30,100")
    p.add_argument("--batch", type=int, default=12)
    p.add_argument("--warm", type=int, default=100)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--out")
    a = p.parse_args()
    data = np.frombuffer(open(a.data, "rb").read(), dtype=np.uint8)
    threads = torch.get_num_threads()
    cuda = torch.cuda.is_available()
    out = open(a.out, "w") if a.out else None
    for name in a.presets.split(","):
        cfg = PRESETS[name]
        t = cfg["ctx"]
        rng = np.random.default_rng(0)

        def batch():
            ix = rng.integers(0, len(data) - t - 1, a.batch)
            x = np.stack([data[i : i + t] for i in ix]).astype(np.int64)
            y = np.stack([data[i + 1 : i + t + 1] for i in ix]).astype(np.int64)
            return torch.from_numpy(x), torch.from_numpy(y)

        torch.manual_seed(0)
        torch.set_num_threads(threads)
        theta0 = {k: v.detach().clone() for k, v in GPT(**cfg).state_dict().items()}
        theta = {
            k: v.detach().clone()
            for k, v in zip(theta0, inner_phase(cfg, theta0, [batch() for _ in range(a.warm)], "cpu", a.lr))
        }
        theta = {k: (theta0[k] - theta[k].view_as(theta0[k])).contiguous() for k in theta0}
        for h in [int(s) for s in a.inner_steps.split(",")]:
            batches = [batch() for _ in range(h)]
            t0 = time.perf_counter()
            ref = inner_phase(cfg, theta, batches, "cpu", a.lr)
            ref_secs = time.perf_counter() - t0
            runs = {}
            torch.set_num_threads(max(1, threads // 4))
            runs[f"cpu_{max(1, threads // 4)}_threads"] = inner_phase(cfg, theta, batches, "cpu", a.lr)
            torch.set_num_threads(threads)
            cuda_secs = None
            if cuda:
                t0 = time.perf_counter()
                runs["cuda_fp32"] = inner_phase(cfg, theta, batches, "cuda", a.lr)
                cuda_secs = time.perf_counter() - t0
                runs["cuda_fp32_again"] = inner_phase(cfg, theta, batches, "cuda", a.lr)
                runs["cuda_tf32"] = inner_phase(cfg, theta, batches, "cuda", a.lr, tf32=True)
            qref = [int8_absmax(r) for r in ref]
            row = {
                "preset": name,
                "params": sum(v.numel() for v in theta.values()),
                "inner_steps": h,
                "batch": a.batch,
                "reference": f"cpu_{threads}_threads",
                "reference_secs": round(ref_secs, 2),
                "cuda_secs": None if cuda_secs is None else round(cuda_secs, 2),
                "distance": {k: distance(v, ref) for k, v in runs.items()},
                "distance_int8": {k: distance([int8_absmax(x) for x in v], qref) for k, v in runs.items()},
                "cuda_vs_cuda_again": distance(runs["cuda_fp32_again"], runs["cuda_fp32"]) if cuda else None,
                "torch": torch.__version__,
                "gpu": torch.cuda.get_device_name(0) if cuda else None,
            }
            line = json.dumps(row)
            print(line, flush=True)
            if out:
                out.write(line + "\n")
                out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
