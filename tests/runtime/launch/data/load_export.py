#!/usr/bin/env python3
"""Loads `parlab train --export` files into PyTorch without parlab's code and compares them.

The safetensors format is read here from its specification (an independent reader: the
`safetensors` package is not needed): u64 little-endian header length N, N bytes of JSON
{name: {dtype, shape, data_offsets}}, then the data section. Each file is loaded with
load_state_dict(strict=True) into the lab MLP written as a plain torch.nn.Module, so a wrong
tensor name, shape or missing tensor fails; then the files are compared normwise:
max |a - b| / max |reference| over every parameter.

usage: load_export.py REFERENCE.safetensors OTHER.safetensors... [--tol 1e-4]
"""
import json
import struct
import sys

import torch


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    header.pop("__metadata__", None)
    data = blob[8 + n:]
    tensors, end = {}, 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        assert info["dtype"] == "F32", f"{name}: dtype {info['dtype']}"
        begin, stop = info["data_offsets"]
        assert begin == end, f"{name}: hole or overlap at byte {begin}"
        count = 1
        for d in info["shape"]:
            count *= d
        assert stop - begin == 4 * count, f"{name}: {stop - begin} bytes for shape {info['shape']}"
        values = struct.unpack(f"<{count}f", data[begin:stop])
        tensors[name] = torch.tensor(values, dtype=torch.float32).reshape(info["shape"])
        end = stop
    assert end == len(data), "data section longer than its tensors"
    return tensors


class Block(torch.nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.fc1 = torch.nn.Linear(h, f)
        self.fc2 = torch.nn.Linear(f, h)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(x), approximate="tanh"))


class LabMlp(torch.nn.Module):
    def __init__(self, h, f, blocks, classes):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(h, f) for _ in range(blocks)])
        self.head = torch.nn.Linear(h, classes)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def load(path):
    sd = read_safetensors(path)
    h = sd["head.weight"].shape[1]
    classes = sd["head.weight"].shape[0]
    blocks = len({k.split(".")[1] for k in sd if k.startswith("blocks.")})
    f = sd["blocks.0.fc1.weight"].shape[0] if blocks else 1
    model = LabMlp(h, f, blocks, classes)
    model.load_state_dict(sd, strict=True)
    return model, sd


def main(argv):
    tol = 1e-4
    if "--tol" in argv:
        i = argv.index("--tol")
        tol = float(argv[i + 1])
        del argv[i:i + 2]
    ref_model, ref = load(argv[0])
    x = torch.linspace(-1, 1, ref["head.weight"].shape[1]).reshape(1, -1)
    ref_out = ref_model(x)
    scale = max(float(v.abs().max()) for v in ref.values())
    worst = 0.0
    for path in argv[1:]:
        model, sd = load(path)
        diff = max(float((sd[k] - ref[k]).abs().max()) for k in ref) / scale
        out_diff = float((model(x) - ref_out).abs().max())
        print(f"{path}: {len(sd)} tensors loaded; normwise difference from {argv[0]}: {diff:.3g}; "
              f"logits differ by {out_diff:.3g}")
        worst = max(worst, diff)
    if worst > tol:
        print(f"FAIL: largest normwise difference {worst:.3g} > {tol:g}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
