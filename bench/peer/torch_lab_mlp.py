"""The PyTorch peer of parlab's lab-mlp job, for bench_peer: the same network (residual blocks
x + fc2(gelu_tanh(fc1(x))), a linear head, cross-entropy), the same global batch split into the
same microbatches, AdamW, one thread per rank; 2+ workers run DDP over Gloo (gradient
all-reduce overlapping the last microbatch's backward, as parlab's buckets do).
precision=mixed is torch.autocast(cpu, bfloat16): bf16 matmuls, fp32 master weights and state.

Prints one line: "step_seconds s1 s2 ..." (the slowest rank's time of each measured step).
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.fc1 = nn.Linear(h, f)
        self.fc2 = nn.Linear(f, h)
        self.act = nn.GELU(approximate="tanh")

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(x)))


class LabMlp(nn.Module):
    def __init__(self, h, f, blocks, classes):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(h, f) for _ in range(blocks)])
        self.head = nn.Linear(h, classes)

    def forward(self, x):
        return self.head(self.blocks(x))


def rank_main(rank, args, port):
    torch.set_num_threads(1)
    world = args.workers
    if world > 1:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(1)
    model = LabMlp(args.hidden, args.ffn, args.blocks, args.classes)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4)
    per_rank = args.gbs // world
    micro = per_rank // args.mb
    g = torch.Generator().manual_seed(100 + rank)
    xs = torch.randn(per_rank, args.hidden, generator=g)
    ys = torch.randint(0, args.classes, (per_rank,), generator=g)
    loss_fn = nn.CrossEntropyLoss(reduction="sum")
    times = []
    for step in range(args.warmup + args.steps):
        if world > 1:
            dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        for m in range(micro):
            x = xs[m * args.mb:(m + 1) * args.mb]
            y = ys[m * args.mb:(m + 1) * args.mb]
            last = m == micro - 1
            ctx = model.no_sync() if (world > 1 and not last) else _null()
            with ctx:
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "mixed"):
                    logits = model(x)
                loss = loss_fn(logits.float(), y) / args.gbs
                loss.backward()
        opt.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
    if world > 1:
        t = torch.tensor(times, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        times = t.tolist()
        dist.destroy_process_group()
    if rank == 0:
        print("step_seconds " + " ".join(f"{s:.6f}" for s in times), flush=True)


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--precision", choices=["fp32", "mixed"], default="fp32")
    p.add_argument("--gbs", type=int, default=1024)
    p.add_argument("--mb", type=int, default=64)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--ffn", type=int, default=4096)
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--classes", type=int, default=16)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--port", type=int, default=29611)
    args = p.parse_args()
    if args.workers == 1:
        rank_main(0, args, args.port)
    else:
        mp.spawn(rank_main, args=(args, args.port), nprocs=args.workers, join=True)


if __name__ == "__main__":
    main()
