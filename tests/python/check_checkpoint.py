#!/usr/bin/env python3
"""Checks a tapeless checkpoint from Python, as a PyTorch or NumPy user would read it.

  check_checkpoint.py CHECKPOINT ARCH_JSON X_NPY YHAT_NPY

ARCH_JSON lists the nn.Sequential the tapeless model is equivalent to, e.g.
  [["linear", 1, 16], ["gelu_tanh"], ["skip", [["linear", 16, 16], ["tanh"]]], ["layer_norm", 16], ["linear", 16, 1]]
The checkpoint is parsed by read_safetensors.py's reader (numpy only), the forward pass
is computed with numpy from the state_dict names, and compared with tapeless' outputs
(YHAT_NPY, shape (batch, outputs)) for the inputs X_NPY (shape (batch, inputs)). Where
torch is importable, the same architecture is built as a torch nn.Sequential,
load_state_dict(strict=True) must succeed, and its outputs are compared too.
Exit 0: all agree; 1: a difference; 77: numpy missing (skipped).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import numpy as np
    from read_safetensors import read  # noqa: E402
except ImportError as error:
    print("SKIP:", error)
    sys.exit(77)


def numpy_forward(arch, state, prefix, x):
    index = 0
    for layer in arch:
        kind, name = layer[0], f"{prefix}{index}"
        if kind == "linear":
            x = x @ state[name + ".weight"].T + state[name + ".bias"]
        elif kind == "layer_norm":
            mean = x.mean(axis=1, keepdims=True)
            var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
            x = (x - mean) / np.sqrt(var + 1e-5) * state[name + ".weight"] + state[name + ".bias"]
        elif kind == "skip":
            x = x + numpy_forward(layer[1], state, name + ".", x)
        elif kind == "gelu_tanh":
            x = 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))
        elif kind == "tanh":
            x = np.tanh(x)
        else:
            raise ValueError(f"unknown layer {kind}")
        index += 1
    return x


def torch_model(arch):
    import torch

    class Skip(torch.nn.Sequential):
        def forward(self, x):
            return x + super().forward(x)

    modules = []
    for layer in arch:
        kind = layer[0]
        if kind == "linear":
            modules.append(torch.nn.Linear(layer[1], layer[2]))
        elif kind == "layer_norm":
            modules.append(torch.nn.LayerNorm(layer[1]))
        elif kind == "skip":
            modules.append(Skip(*torch_model(layer[1])))
        elif kind == "gelu_tanh":
            modules.append(torch.nn.GELU(approximate="tanh"))
        elif kind == "tanh":
            modules.append(torch.nn.Tanh())
    return modules


def main():
    checkpoint, arch_path, x_path, yhat_path = sys.argv[1:5]
    arch = json.load(open(arch_path))
    tensors, metadata = read(checkpoint)
    state = {name: np.asarray(values, dtype=np.float64) for name, (_dtype, values) in tensors.items()}
    x = np.load(x_path).astype(np.float64)
    expected = np.load(yhat_path).astype(np.float64)
    got = numpy_forward(arch, state, "", x)
    scale = max(1.0, float(np.abs(expected).max()))
    error = float(np.abs(got - expected).max()) / scale
    print(f"numpy forward from the checkpoint: max difference {error:.2e} ({len(state)} tensors, metadata {metadata})")
    ok = error < 1e-5
    try:
        import torch
    except ImportError:
        print("torch not importable: load_state_dict not checked here")
        return 0 if ok else 1
    dtype = torch.float64 if next(iter(tensors.values()))[0] == "F64" else torch.float32
    model = torch.nn.Sequential(*torch_model(arch)).to(dtype)
    try:
        from safetensors.torch import load_file
        sd = load_file(checkpoint)
    except ImportError:  # the same tensors, through the numpy reader
        sd = {k: torch.from_numpy(np.array(v)) for k, (_d, v) in tensors.items()}
    sd = {k: v for k, v in sd.items() if not k.startswith("optimizer.")}
    model.load_state_dict(sd, strict=True)
    with torch.no_grad():
        out = model(torch.from_numpy(x).to(dtype)).double().numpy()
    torch_error = float(np.abs(out - expected).max()) / scale
    print(f"torch nn.Sequential.load_state_dict(strict=True): outputs differ by {torch_error:.2e}")
    return 0 if ok and torch_error < 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
