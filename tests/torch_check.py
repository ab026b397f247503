"""torch_check.py: the PyTorch side of test_torch.sh.

For one network: tests/torch_step writes dltrain's initial weights as a
checkpoint; the same weights go into a hand-written PyTorch module with the
same state_dict names (torchvision's for the ImageNet nets, so a wrong layer
in a network file shows up as a missing or misshapen tensor); both run one
training step on the same batch, and then one evaluation forward (running
statistics, no dropout).  Every weight gradient, every batch-norm running
statistic and num_batches_tracked count after the step (the checkpoint is
a whole state_dict: no buffer of the model may be missing from it), and
the evaluation logits are compared with
PyTorch in float64: dltrain's distance (max |a - b| over max |b|) must be at
most FACTOR times PyTorch float32's own distance (or four float32
roundings, 2^-21, when that is smaller: kernels that sum in another order
move a logit by a few roundings even where PyTorch float32 happens to land
within one), once per kernel choice.

The training step takes dltrain's discrete decisions (dropout masks, ReLU
and max-pooling winners; see Decisions below), so that what is compared is
arithmetic.

usage: torch_check.py NET_KIND NET_FILE WORK TOOL CHOICE...
  NET_KIND  one of MODELS below; NET_FILE the network file given to TOOL
  CHOICE    "default", or --kernel choices joined by commas (all=reference);
            a leading "!" marks a choice known to drift, which must fail;
            "precision=bf16" among them runs dltrain in bf16, and its distance
            to float64 must be within BF16_FACTOR of PyTorch's bf16 autocast's
            (torch.autocast on the CPU: linear and convolution in bf16, the
            loss in float32), where the others compare with float32
Prints "# ..." diagnostics and one line "RESULT <0|1> <description>" per
check (training step, evaluation) and choice; exits 0 (non-zero only when
it cannot run).
"""
import gzip
import json
import math
import os
import struct
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

FACTOR = 4.0
BF16_FACTOR = 2.0
FLOOR = 2.0 ** -21
# In bf16, one rounding (2^-9 relative): the training loss is one number
# whose error is a sum of many roundings of either sign, and dltrain's and
# PyTorch's differ by chance (test_torch.sh measured 1.0-2.6x on one
# network over seeds, and an emulation of dltrain's rounding points in
# float64 gave dltrain's loss to 1e-8: the points are the designed ones).
BF16_FLOOR = 2.0 ** -9
FASHION = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
FASHION_LABELS = "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz"


# ------------------------------------------------------------- safetensors
def st_read(path):
    """The tensors of a safetensors file, mapped (not read) into memory."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    types = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64, "U64": np.uint64}
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        out[name] = data[b:e].view(types[info["dtype"]]).reshape(info["shape"])
    return out


def st_write(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        dtype = {np.dtype(np.float32): "F32", np.dtype(np.int32): "I32"}[a.dtype]
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


# ------------------------------------------------------------------ models
# The training step takes dltrain's discrete decisions: its dropout masks
# (its own random streams), and which ReLU inputs were positive and which
# max-pooling inputs won (first largest, as in both).  Those decisions jump
# where a value sits within rounding of a ReLU's zero or of a window's
# runner-up, and a single jump moves a gradient by a whole term (1e-2 of a
# batch norm's over 64 values), so two float32 runs may legitimately differ
# there; with the decisions shared the comparison is of arithmetic alone.
# They are taken in forward order, which is the network file's order.
class Decisions:
    def __init__(self, out):
        self.relu = [out[k] for k in out if k.startswith("relu.")]
        self.pool = [out[k] for k in out if k.startswith("maxpool_input.")]
        self.dropout = {k[len("dropout."):]: out[k] for k in out if k.startswith("dropout.")}


DECISIONS = None  # set for a training forward


def relu(x):
    if DECISIONS is None:
        return F.relu(x)
    kept = DECISIONS.relu.pop(0).reshape(x.shape) > 0
    return x * torch.from_numpy(kept).to(x.dtype)


def max_pool(x, kernel, stride, pad=0):
    if DECISIONS is None:
        return F.max_pool2d(x, kernel, stride, pad)
    chosen_from = torch.from_numpy(DECISIONS.pool.pop(0).astype(np.float64)).reshape(x.shape)
    _, idx = F.max_pool2d(chosen_from, kernel, stride, pad, return_indices=True)
    return x.flatten(2).gather(2, idx.flatten(2)).reshape(idx.shape)


class ReLU(nn.Module):
    def forward(self, x):
        return relu(x)


class MaxPool(nn.Module):
    def __init__(self, kernel, stride):
        super().__init__()
        self.kernel, self.stride = kernel, stride

    def forward(self, x):
        return max_pool(x, self.kernel, self.stride)


class Dropout(nn.Module):
    """Inverted dropout with dltrain's mask (nonzero where it kept a value)."""

    def __init__(self, p):
        super().__init__()
        self.p, self.name = p, None

    def forward(self, x):
        if DECISIONS is None:
            return x
        kept = DECISIONS.dropout[self.name].reshape(x.shape) != 0
        return x * torch.from_numpy(kept).to(x.dtype) / (1 - self.p)


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1, self.fc2, self.fc3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = max_pool(relu(self.conv1(x)), 2, 2)
        x = max_pool(relu(self.conv2(x)), 2, 2).flatten(1)
        return self.fc3(relu(self.fc2(relu(self.fc1(x)))))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(784, 512), nn.Linear(512, 512), nn.Linear(512, 10)

    def forward(self, x):
        return self.fc3(relu(self.fc2(relu(self.fc1(x.flatten(1))))))


class ResMLP(nn.Module):
    """A layer norm's output read by a linear (bf16 under autocast) and by a
    residual add (f32: it adds an f32 and a bf16 tensor): its gradient is
    the add's plus the cast's, the linear's input gradient made f32."""

    def __init__(self):
        super().__init__()
        self.fc0, self.ln = nn.Linear(784, 32), nn.LayerNorm(32)
        self.fc1, self.fc2 = nn.Linear(32, 32), nn.Linear(32, 10)

    def forward(self, x):
        y = self.ln(self.fc0(x.flatten(1)).to(x.dtype))  # layer norm in the model's dtype (f32 under autocast)
        return self.fc2(y + self.fc1(y))


class BNMaxPool(nn.Module):
    """The network of issue 18: batch norm, then max pooling, on raw images."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
        self.fc = nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):
        x = max_pool(relu(self.bn1(self.conv1(x))), 2, 2)
        x = F.avg_pool2d(relu(self.bn2(self.conv2(x))), 2)
        return self.fc(x.flatten(1))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(relu(self.bn1(self.conv1(x)))))
        return relu(y + (self.downsample(x) if self.downsample else x))


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = 4 * width
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = relu(self.bn1(self.conv1(x)))
        y = self.bn3(self.conv3(relu(self.bn2(self.conv2(y)))))
        return relu(y + (self.downsample(x) if self.downsample else x))


class ResNet(nn.Module):
    """torchvision's ResNet layout (v1.5: stride on the 3x3 convolution)."""

    def __init__(self, bottleneck, counts):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64)
        cin, stages = 64, []
        for i, n in enumerate(counts):
            width, blocks = 64 << i, []
            for j in range(n):
                stride = 2 if i > 0 and j == 0 else 1
                blocks.append(Bottleneck(cin, width, stride) if bottleneck else BasicBlock(cin, width, stride))
                cin = 4 * width if bottleneck else width
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Linear(cin, 1000)

    def forward(self, x):
        x = max_pool(relu(self.bn1(self.conv1(x))), 3, 2, 1)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(x.mean((2, 3)))


class AlexNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 11, 4, 2), ReLU(), MaxPool(3, 2),
            nn.Conv2d(64, 192, 5, padding=2), ReLU(), MaxPool(3, 2),
            nn.Conv2d(192, 384, 3, padding=1), ReLU(), nn.Conv2d(384, 256, 3, padding=1), ReLU(),
            nn.Conv2d(256, 256, 3, padding=1), ReLU(), MaxPool(3, 2))
        self.classifier = nn.Sequential(
            Dropout(0.5), nn.Linear(9216, 4096), ReLU(), Dropout(0.5), nn.Linear(4096, 4096), ReLU(),
            nn.Linear(4096, 1000))

    def forward(self, x):
        return self.classifier(F.adaptive_avg_pool2d(self.features(x), 6).flatten(1))


class VGG16(nn.Module):
    def __init__(self):
        super().__init__()
        layers, cin = [], 3
        for v in [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]:
            if v == "M":
                layers.append(MaxPool(2, 2))
            else:
                layers += [nn.Conv2d(cin, v, 3, padding=1), ReLU()]
                cin = v
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Linear(25088, 4096), ReLU(), Dropout(0.5), nn.Linear(4096, 4096), ReLU(), Dropout(0.5),
            nn.Linear(4096, 1000))

    def forward(self, x):
        return self.classifier(F.adaptive_avg_pool2d(self.features(x), 7).flatten(1))


class Bigram(nn.Module):
    """nets/bigram.yaml: an embedding whose vectors are the next byte's scores."""

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(256, 256)

    def forward(self, x):
        return self.wte(x)  # [N, T, 256]


class BigramMLP(nn.Module):
    """An MLP at every position after an embedding (test_torch.sh's bigram_mlp):
    fc layers on the last dim, a ReLU whose decisions come from dltrain in its
    [C][T] order (core/shape.h), hence the transposes."""

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(256, 24)
        self.fc1, self.head = nn.Linear(24, 48), nn.Linear(48, 256)

    def forward(self, x):
        h = self.fc1(self.wte(x)).transpose(1, 2)  # [N, 48, T]
        return self.head(relu(h).transpose(1, 2))


class BigramTied(nn.Module):
    """test_torch.sh's bigram_tied: the head's weight is the embedding's
    (share: in the network file; tie_weights in Hugging Face's GPT-2).  The
    tied tensor's gradient is the sum of both uses', under wte.weight."""
    tied = ("head.weight",)

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(256, 24)
        self.fc1, self.head = nn.Linear(24, 24), nn.Linear(24, 256)
        self.head.weight = self.wte.weight

    def forward(self, x):
        h = self.fc1(self.wte(x)).transpose(1, 2)  # [N, 24, T]
        return self.head(relu(h).transpose(1, 2))


class RMSNorm(nn.Module):
    """Hugging Face's LlamaRMSNorm (torch 1.13 has no nn.RMSNorm): the mean
    of the squares over the last dim, in the input's dtype here (f32)."""

    def __init__(self, C, eps):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(C)), eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class BigramRMS(nn.Module):
    """test_torch.sh's bigram_rms: an RMS norm at every position between an
    embedding and an MLP (the LLaMA family's norm)."""

    def __init__(self):
        super().__init__()
        self.wte, self.norm = nn.Embedding(256, 24), RMSNorm(24, 1e-5)
        self.fc1, self.head = nn.Linear(24, 48), nn.Linear(48, 256)

    def forward(self, x):
        h = self.fc1(self.norm(self.wte(x))).transpose(1, 2)  # [N, 48, T]
        return self.head(relu(h).transpose(1, 2))


class BigramRNN(nn.Module):
    """tests/test_rnn.sh's recurrent nets: an embedding, a recurrent layer
    (nn.LSTM or nn.GRU, batch_first, as the network file's attributes say)
    and a head at every position."""

    def __init__(self, kind, hidden, layers=1, bidirectional=False):
        super().__init__()
        self.wte = nn.Embedding(256, 16)
        self.rnn = kind(16, hidden, num_layers=layers, bidirectional=bidirectional, batch_first=True)
        self.head = nn.Linear(hidden * (2 if bidirectional else 1), 256)

    def forward(self, x):
        return self.head(self.rnn(self.wte(x))[0])


class Experts(nn.Module):
    """E SwiGLU MLPs, their weights stacked as dltrain keeps them: w1 and w3
    [E, F, C], w2 [E, C, F] (Mixtral's experts.N.w1/w3/w2.weight)."""

    def __init__(self, E, C, F_):
        super().__init__()
        self.w1, self.w3 = nn.Parameter(torch.zeros(E, F_, C)), nn.Parameter(torch.zeros(E, F_, C))
        self.w2 = nn.Parameter(torch.zeros(E, C, F_))


class MoE(nn.Module):
    """A mixture of experts as Hugging Face's MixtralSparseMoeBlock computes
    it: softmax over the router's logits, the top k, gates renormalised over
    them (normalize; OLMoE without norm_topk_prob: not), each expert's SwiGLU
    MLP weighted by its gate.  The Switch balancing loss as Hugging Face's
    load_balancing_loss_func computes it over one sample's positions and one
    layer, the z-loss (ST-MoE), both averaged over the samples (added_loss)."""

    def __init__(self, C, E, K, F_, aux=0.0, z=0.0, normalize=True):
        super().__init__()
        self.gate, self.experts = nn.Linear(C, E, bias=False), Experts(E, C, F_)
        self.E, self.K, self.aux, self.z, self.normalize, self.added_loss = E, K, aux, z, normalize, None

    def forward(self, x):  # [N, T, C]
        logits = self.gate(x)
        probs = F.softmax(logits, dim=-1)
        top, chosen = torch.topk(probs, self.K, dim=-1)
        if self.normalize:
            top = top / top.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(x)
        w = self.experts
        for e in range(self.E):
            g = (top * (chosen == e)).sum(dim=-1, keepdim=True)  # 0 where e was not chosen
            out = out + g * ((F.silu(x @ w.w1[e].t()) * (x @ w.w3[e].t())) @ w.w2[e].t())
        share = F.one_hot(chosen, self.E).to(x.dtype).sum(dim=2).mean(dim=1)  # [N, E], summing to k
        balance = self.aux * self.E * (share * probs.mean(dim=1)).sum(dim=-1)
        z = self.z * torch.logsumexp(logits, dim=-1).pow(2).mean(dim=1)
        self.added_loss = (balance + z).mean()
        return out


class BigramMoE(nn.Module):
    """test_torch.sh's bigram_moe and bigram_moe_olmoe: an embedding, an RMS
    norm, a mixture of experts added to the embedding, a head."""

    def __init__(self, E=4, K=2, aux=0.1, z=0.01, normalize=True):
        super().__init__()
        self.wte, self.norm = nn.Embedding(256, 24), RMSNorm(24, 1e-5)
        self.moe, self.head = MoE(24, E, K, 16, aux, z, normalize), nn.Linear(24, 256)

    def forward(self, ids):
        x = self.wte(ids)
        return self.head(x + self.moe(self.norm(x)))


def rope(x, D, theta, factor=1.0, low=1.0, high=4.0, ctx=8192):
    """Hugging Face's rotary embedding (rotate_half; Llama 3's inv_freq
    when factor > 1) on x [N, T, C] of heads of D features, in x's dtype."""
    inv = 1.0 / theta ** (torch.arange(0, D, 2, dtype=x.dtype) / D)
    if factor != 1:
        wave = 2 * math.pi / inv
        scaled = torch.where(wave > ctx / low, inv / factor, inv)
        smooth = (ctx / wave - low) / (high - low)
        blended = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wave < ctx / high) & ~(wave > ctx / low)
        inv = torch.where(medium, blended, scaled)
    angle = torch.arange(x.shape[1], dtype=x.dtype)[:, None] * inv[None, :]
    cos, sin = torch.cat((angle, angle), -1).cos(), torch.cat((angle, angle), -1).sin()  # [T, D]
    h = x.reshape(x.shape[0], x.shape[1], -1, D)
    turned = torch.cat((-h[..., D // 2:], h[..., :D // 2]), -1)
    return (h * cos[None, :, None, :] + turned * sin[None, :, None, :]).reshape(x.shape)


class BigramRope(nn.Module):
    """test_torch.sh's bigram_rope: rotary positions (two heads of 8, Llama 3
    scaling with its three bands) on the features of every position."""

    def __init__(self):
        super().__init__()
        self.wte, self.q = nn.Embedding(256, 16), nn.Linear(16, 16)
        self.head = nn.Linear(16, 256)

    def forward(self, x):
        h = rope(self.q(self.wte(x)), 8, 500.0, 8.0, 1.0, 4.0, 64).transpose(1, 2)  # [N, 16, T]
        return self.head(relu(h).transpose(1, 2))


class LlamaAttention(nn.Module):
    """test_torch.sh's llama_attention: a LLaMA attention block as Hugging
    Face's LlamaAttention computes it: RMS norm, q, k and v projections of
    different widths without biases, rotary positions on q and k,
    grouped-query attention (4 query heads of 6 over 2 kv heads: repeat_kv),
    the output projection added to the residual stream, then a head."""

    def __init__(self, C=24, H=4, KV=2):
        super().__init__()
        d = C // H
        self.wte, self.norm = nn.Embedding(256, C), RMSNorm(C, 1e-5)
        self.q, self.k, self.v = nn.Linear(C, C, bias=False), nn.Linear(C, KV * d, bias=False), \
            nn.Linear(C, KV * d, bias=False)
        self.o, self.head = nn.Linear(C, C, bias=False), nn.Linear(C, 256)
        self.H, self.KV, self.d = H, KV, d

    def forward(self, ids):
        x = self.wte(ids)
        N, T, C = x.shape
        h = self.norm(x)
        q, k = rope(self.q(h), self.d, 10000.0), rope(self.k(h), self.d, 10000.0)
        q = q.view(N, T, self.H, self.d).transpose(1, 2)  # [N, H, T, d]
        k, v = (z.view(N, T, self.KV, self.d).transpose(1, 2).repeat_interleave(self.H // self.KV, dim=1)
                for z in (k, self.v(h)))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        weights = F.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        return self.head(x + self.o((weights @ v).transpose(1, 2).reshape(N, T, C)))


class LlamaBlock(nn.Module):
    """A LLaMA decoder layer as Hugging Face's LlamaDecoderLayer computes it
    (its module names): RMS norm, attention with rotary positions and
    grouped kv heads, RMS norm, SwiGLU MLP, each added to its input."""

    def __init__(self, C, H, KV, F, theta, eps):
        super().__init__()
        d = C // H
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(C, eps), RMSNorm(C, eps)
        self.self_attn = nn.Module()
        self.self_attn.q_proj = nn.Linear(C, H * d, bias=False)
        self.self_attn.k_proj, self.self_attn.v_proj = nn.Linear(C, KV * d, bias=False), nn.Linear(C, KV * d, bias=False)
        self.self_attn.o_proj = nn.Linear(H * d, C, bias=False)
        self.mlp = nn.Module()
        self.mlp.gate_proj, self.mlp.up_proj = nn.Linear(C, F, bias=False), nn.Linear(C, F, bias=False)
        self.mlp.down_proj = nn.Linear(F, C, bias=False)
        self.H, self.KV, self.d, self.theta = H, KV, d, theta

    def attention(self, x):
        N, T, C = x.shape
        a = self.self_attn
        q, k = rope(a.q_proj(x), self.d, self.theta), rope(a.k_proj(x), self.d, self.theta)
        q = q.view(N, T, self.H, self.d).transpose(1, 2)  # [N, H, T, d]
        k, v = (z.view(N, T, self.KV, self.d).transpose(1, 2).repeat_interleave(self.H // self.KV, dim=1)
                for z in (k, a.v_proj(x)))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        weights = F.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        return a.o_proj((weights @ v).transpose(1, 2).reshape(N, T, self.H * self.d))

    def forward(self, x):
        x = x + self.attention(self.input_layernorm(x))
        h = self.post_attention_layernorm(x)
        return x + self.mlp.down_proj(F.silu(self.mlp.gate_proj(h)) * self.mlp.up_proj(h))


class LlamaTiny(nn.Module):
    """nets/llama-tiny.yaml: Hugging Face's LlamaForCausalLM layout (module
    names model.embed_tokens, model.layers.N..., model.norm, lm_head tied
    to the embedding) at width 64, 4 heads over 2 kv heads, MLP 128."""
    tied = ("lm_head.weight",)

    def __init__(self, V=256, C=64, H=4, KV=2, F_=128, layers=2, theta=10000.0, eps=1e-5):
        super().__init__()
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(V, C)
        self.model.layers = nn.ModuleList(LlamaBlock(C, H, KV, F_, theta, eps) for _ in range(layers))
        self.model.norm = RMSNorm(C, eps)
        self.lm_head = nn.Linear(C, V, bias=False)
        self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, ids):
        x = self.model.embed_tokens(ids)
        for block in self.model.layers:
            x = block(x)
        return self.lm_head(self.model.norm(x))


class LlamaDocs(nn.Module):
    """test_torch.sh's llama_docs: nets/llama-tiny.yaml with document
    masking (data.document_mask: 10, a newline ends a document), as
    transformers' LlamaForCausalLM computes it given the equivalent 4-D mask
    (block-causal: query t sees key s <= t of its own document) and position
    ids that restart at each document; its loss takes labels -100 after each
    separator (docs_labels)."""
    tied = ("lm_head.weight",)
    separator = 10

    def __init__(self):
        super().__init__()
        from transformers import LlamaConfig, LlamaForCausalLM
        config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                             rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
                             attention_bias=False, attn_implementation="eager")
        hf = LlamaForCausalLM(config)
        self.model, self.lm_head = hf.model, hf.lm_head  # its modules, under its names
        object.__setattr__(self, "hf", hf)  # not a submodule: its parameters are the two above

    def forward(self, ids):
        N, T = ids.shape
        ends = (ids == self.separator).long()
        # document index of each position: the separators strictly before it
        doc = torch.cat([torch.zeros(N, 1, dtype=torch.long), ends[:, :-1].cumsum(1)], 1)
        first = torch.arange(T).expand(N, T).clone()
        first[:, 1:][ends[:, :-1] == 0] = -1
        start = torch.cummax(first, 1).values  # the position each one's document starts at
        same = doc[:, :, None] == doc[:, None, :]
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        mask = (same & causal).to(self.lm_head.weight.dtype)[:, None]  # [N, 1, T, T]: 1 attends, 0 masked
        return self.hf(input_ids=ids, attention_mask=mask, position_ids=torch.arange(T) - start).logits


def docs_labels(x, y, separator=LlamaDocs.separator):
    """The labels after a separator (the next document's first id): -100."""
    y = y.copy()
    y[x == separator] = -100
    return x, y


class GPTBlock(nn.Module):
    """A GPT-2 block (pre-norm): attention and an MLP, each added to its input."""

    def __init__(self, C, H):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.attn = nn.Module()
        self.attn.c_attn, self.attn.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.mlp = nn.Module()
        self.mlp.c_fc, self.mlp.c_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        self.H = H

    def attention(self, x):
        N, T, C = x.shape
        q, k, v = self.attn.c_attn(x).split(C, dim=2)
        q, k, v = (z.view(N, T, self.H, C // self.H).transpose(1, 2) for z in (q, k, v))  # [N, H, T, d]
        scores = q @ k.transpose(-2, -1) / math.sqrt(C // self.H)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        weights = F.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        return self.attn.c_proj((weights @ v).transpose(1, 2).reshape(N, T, C))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh"))


class GPTTiny(nn.Module):
    """test_torch.sh's gpt_tiny: token and position embeddings, 2 blocks of
    width 32 and 4 heads, a final layer norm and the head tied to the token
    embedding (Hugging Face's GPT-2 modules, with nn.Linear's [out, in]
    weights where its Conv1D has [in, out])."""
    tied = ("lm_head.weight",)

    def __init__(self, V=256, C=32, H=4, context=24, layers=2):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(context, C)
        self.h = nn.ModuleList(GPTBlock(C, H) for _ in range(layers))
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, ids):
        x = self.wte(ids) + self.wpe.weight[:ids.shape[1]]
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def text_windows(n, T):
    """n windows of T + 1 bytes of the text at $DLTRAIN_TEXT (a file), at
    offsets i * T as dltrain's text dataset cuts them: ids and next bytes."""
    data = np.frombuffer(open(os.environ["DLTRAIN_TEXT"], "rb").read((n + 1) * T + 1), np.uint8)
    x = np.stack([data[i * T:i * T + T] for i in range(n)]).astype(np.int32)
    y = np.stack([data[i * T + 1:i * T + T + 1] for i in range(n)]).astype(np.int32)
    return x, y


def fashion(n):
    """The first n Fashion-MNIST training images as raw pixels in [0, 1] (as
    dltrain reads IDX bytes: float(byte) / 255) and their labels."""
    img = gzip.open(FASHION).read()[16:16 + 784 * n]
    lab = gzip.open(FASHION_LABELS).read()[8:8 + n]
    x = np.frombuffer(img, np.uint8).astype(np.float32).reshape(n, 1, 28, 28) / np.float32(255)
    return x, np.frombuffer(lab, np.uint8).astype(np.int32)


def gaussian(n, shape, classes, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n,) + shape).astype(np.float32), rng.integers(0, classes, n).astype(np.int32)


# kind: (module, batch of (x, y))
MODELS = {
    "lenet5": (LeNet5, lambda: fashion(64)),
    "mlp": (MLP, lambda: fashion(64)),
    "bn_maxpool": (BNMaxPool, lambda: fashion(64)),
    "res_mlp": (ResMLP, lambda: fashion(64)),
    "resnet18": (lambda: ResNet(False, [2, 2, 2, 2]), lambda: gaussian(16, (3, 32, 32), 1000, 18)),
    "resnet50": (lambda: ResNet(True, [3, 4, 6, 3]), lambda: gaussian(8, (3, 32, 32), 1000, 50)),
    "alexnet": (AlexNet, lambda: gaussian(4, (3, 64, 64), 1000, 1)),
    "vgg16": (VGG16, lambda: gaussian(2, (3, 32, 32), 1000, 16)),
    "bigram": (Bigram, lambda: text_windows(32, 64)),
    "bigram_mlp": (BigramMLP, lambda: text_windows(16, 32)),
    "bigram_tied": (BigramTied, lambda: text_windows(16, 32)),
    "bigram_rms": (BigramRMS, lambda: text_windows(16, 32)),
    "bigram_rope": (BigramRope, lambda: text_windows(16, 32)),
    "llama_attention": (LlamaAttention, lambda: text_windows(8, 16)),
    "bigram_moe": (BigramMoE, lambda: text_windows(16, 32)),
    "bigram_moe_olmoe": (lambda: BigramMoE(6, 3, 0.05, 0.0, False), lambda: text_windows(16, 32)),
    "bigram_lstm": (lambda: BigramRNN(nn.LSTM, 24), lambda: text_windows(8, 24)),
    "bigram_lstm2": (lambda: BigramRNN(nn.LSTM, 12, 2, True), lambda: text_windows(4, 13)),
    "bigram_gru": (lambda: BigramRNN(nn.GRU, 24), lambda: text_windows(8, 24)),
    "bigram_gru2": (lambda: BigramRNN(nn.GRU, 12, 2, True), lambda: text_windows(4, 13)),
    "llama_tiny": (LlamaTiny, lambda: text_windows(4, 64)),
    "llama_docs": (LlamaDocs, lambda: docs_labels(*text_windows(4, 64))),
    "gpt_tiny": (GPTTiny, lambda: text_windows(8, 16)),
}


def cross_entropy(logits, y):
    """PyTorch's mean cross-entropy; over every position for scores [N, T, C]."""
    if logits.dim() == 3:
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    return F.cross_entropy(logits, y)


def as_dltrain(logits):
    """Logits in dltrain's order: per sample [C] or, for a sequence [T, C],
    stored [C][T] (core/shape.h)."""
    if logits.dim() == 3:
        return logits.transpose(1, 2).reshape(logits.shape[0], -1)
    return logits


# ---------------------------------------------------------------- one step
def torch_run(kind, ckpt, x, y, decisions, dtype, autocast=False):
    """One training step (with dltrain's decisions) and one evaluation
    forward in dtype (under bf16 autocast when asked): gradients
    (grad.<name>), running statistics after the step and evaluation logits,
    as arrays (views of the model's tensors) under dltrain's names."""
    global DECISIONS
    model = MODELS[kind][0]().to(dtype)
    state = {k: torch.from_numpy(v.astype(np.float64)).to(dtype) for k, v in ckpt.items()
             if not k.startswith(("optim.", "rng."))}
    model.load_state_dict(state, strict=False)
    missing = {k for k in set(model.state_dict()) - set(state) if k not in getattr(model, "tied", ())}
    unknown = set(state) - set(model.state_dict())
    if missing or unknown:
        raise SystemExit("state_dict mismatch: missing %s, unknown %s" % (sorted(missing), sorted(unknown)))
    for name, m in model.named_modules():
        if isinstance(m, Dropout):
            m.name = name
    xt = torch.from_numpy(x).long() if x.dtype == np.int32 else torch.from_numpy(x).to(dtype)
    yt = torch.from_numpy(y).long()
    model.train()
    DECISIONS = decisions
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = cross_entropy(model(xt), yt)
        if DECISIONS.relu or DECISIONS.pool:
            raise SystemExit("%d ReLU and %d max-pooling decisions of dltrain left unused"
                             % (len(DECISIONS.relu), len(DECISIONS.pool)))
    finally:
        DECISIONS = None
    added = sum(m.added_loss for m in model.modules() if getattr(m, "added_loss", None) is not None)
    (loss + added).backward()  # a layer's own loss (MoE's balancing) in the gradients, not in the loss shown
    out = {"grad." + k: p.grad.numpy() for k, p in model.named_parameters()}  # views: no copies
    out.update({k: b.numpy() for k, b in model.named_buffers() if "running" in k or "num_batches" in k})
    model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        logits = model(xt).to(dtype)
    out["eval.logits"] = as_dltrain(logits).numpy()
    out["train.loss"] = np.array([loss.item()])
    out["eval.loss"] = np.array([cross_entropy(logits, yt).item()])
    return out


def distance(a, ref):
    """max |a - ref| / max |ref| (ref float64)."""
    scale = np.abs(ref).max()
    return np.abs(a.astype(np.float64) - ref).max() / (scale if scale > 0 else 1.0)


def compare(names, dl, t64, t32, what, factor=FACTOR, low="float32", floor=FLOOR):
    """One check over the tensors names: prints the worst ratios and every
    failing tensor; returns 1 when dltrain is within factor everywhere of
    PyTorch's run in the lower precision, t32 (or of floor when larger)."""
    rows = []
    for name in names:
        d, e32 = distance(dl[name], t64[name]), distance(t32[name], t64[name])
        rows.append((d / max(e32, floor), name, d, e32))
    rows.sort(reverse=True)
    bad = [r for r in rows if r[0] > factor]
    for ratio, name, d, e32 in (bad or rows[:3]):
        print("#   %s %-34s dltrain %.2e  torch %s %.2e  ratio %.2f" % (what, name, d, low, e32, ratio))
    return not bad, rows[0][0]


def main():
    kind, net, work, tool = sys.argv[1:5]
    choices = sys.argv[5:]
    torch.set_num_threads(1)
    ckpt_path = os.path.join(work, kind + ".ckpt")
    batch_path = os.path.join(work, kind + ".batch")
    out_path = os.path.join(work, kind + ".out")
    subprocess.run([tool, "init", net, ckpt_path], check=True)
    x, y = MODELS[kind][1]()
    st_write(batch_path, {"x": x, "y": y})
    ckpt = st_read(ckpt_path)
    for choice in choices:
        name = choice.lstrip("!")
        args = [] if name == "default" else name.split(",")
        subprocess.run([tool, "step", net, ckpt_path, batch_path, out_path] + args, check=True)
        dl = st_read(out_path)
        # PyTorch in float64 and float32 (bf16 autocast), with this run's decisions
        bf16 = "precision=bf16" in args
        factor, low, floor = (BF16_FACTOR, "bf16 autocast", BF16_FLOOR) if bf16 else (FACTOR, "float32", FLOOR)
        t64 = torch_run(kind, ckpt, x, y, Decisions(dl), torch.float64)
        t32 = torch_run(kind, ckpt, x, y, Decisions(dl), torch.float32, autocast=bf16)
        train = [k for k in t64 if k.startswith("grad.") or "running" in k or "num_batches" in k]
        print("# %s, kernels %s: batch %d, %d gradients and running statistics; training loss %.7f (PyTorch "
              "float64 %.7f, %s %.7f)" % (kind, name, len(y), len(train), dl["train.loss"][0],
                                          t64["train.loss"][0], low, t32["train.loss"][0]))
        if bf16:
            train.append("train.loss")
        ok, worst = compare(train, dl, t64, t32, "step", factor, low, floor)
        if choice.startswith("!"):  # a kernel known to drift: the check must catch it
            print("RESULT %d %s, kernels %s: the check catches it (worst %.0fx PyTorch float32's distance)"
                  % (0 if not ok else 1, kind, name, worst))
            continue
        print("RESULT %d %s, kernels %s: one training step's %sgradients and running statistics within %gx of "
              "PyTorch %s's distance to float64 (worst %.2fx)"
              % (0 if ok else 1, kind, name, "loss, " if bf16 else "", factor, low, worst))
        ok, worst = compare(["eval.logits"], dl, t64, t32, "eval", factor, low, floor)
        print("RESULT %d %s, kernels %s: evaluation logits (running statistics, no dropout) within %gx (%.2fx)"
              % (0 if ok else 1, kind, name, factor, worst))
        del dl, t64, t32


if __name__ == "__main__":
    main()
