"""The PyTorch peer of parlab's lab-mlp job, for bench_peer: the same network (residual blocks
x + fc2(gelu_tanh(fc1(x))), a linear head, cross-entropy), the same global batch split into the
same microbatches, AdamW, one thread per rank; 2+ workers run DDP over Gloo (gradient
all-reduce overlapping the last microbatch's backward, as parlab's buckets do).
precision=mixed is torch.autocast(cpu, bfloat16): bf16 matmuls, fp32 master weights and state.

Prints two lines: "peer_blas ..." (what torch's CPU linear layers run on here: the OpenBLAS core
type it detected or was told through OPENBLAS_CORETYPE, and whether oneDNN is built in and used for
bf16) and "step_seconds s1 s2 ..." (the slowest rank's time of each measured step).

In torch 1.13 an fp32 nn.Linear on the CPU is addmm on the system BLAS (BLAS_INFO=generic: Debian's
OpenBLAS); under autocast(bfloat16) it is oneDNN's bf16 matmul. OpenBLAS picks its kernels from
the CPU's family/model, so on a CPU it does not know (a VM reporting a generic "Intel Xeon
Processor") it falls back to "Prescott" SSE3 kernels: the caller names the core in the peer's
environment (bench_peer does, and prints why).
"""
import ctypes
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


def blas_report():
    """One line: torch's BLAS and oneDNN as this process will use them."""
    core = "unknown"
    for name in ("libopenblas.so.0", "libopenblas.so"):
        try:
            lib = ctypes.CDLL(name)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            core = "openblas:" + lib.openblas_get_corename().decode()
            break
        except OSError:
            continue
    mkldnn = torch.backends.mkldnn.is_available()
    return (f"peer_blas core={core} OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')} "
            f"mkldnn={'yes (bf16 matmuls)' if mkldnn else 'no'} "
            f"threads={torch.get_num_threads()}")


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
        print(blas_report(), flush=True)
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
