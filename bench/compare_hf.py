"""compare_hf.py: the PyTorch side of bench/compare-gpt2, bench/compare-llama
and bench/compare-moe (see there): a network of nets/ against its Hugging
Face model (--model)."""
import argparse
import re
import resource
import statistics
import subprocess
import sys
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM


def gpt2():
    return GPT2LMHeadModel(GPT2Config(n_positions=1024, n_embd=768, n_layer=12, n_head=12, vocab_size=50257,
                                      resid_pdrop=0, embd_pdrop=0, attn_pdrop=0))


def smollm2():
    return LlamaForCausalLM(LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536,
                                        num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                                        max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=100000.0,
                                        tie_word_embeddings=True))


def moe_tiny():
    return MixtralForCausalLM(MixtralConfig(vocab_size=256, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                                            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                            rms_norm_eps=1e-5, rope_theta=10000.0, num_local_experts=4,
                                            num_experts_per_tok=2, tie_word_embeddings=True))


# --model: (nets/ file, Hugging Face model, title)
MODELS = {"gpt2": ("gpt2.yaml", gpt2, "GPT-2 small"), "smollm2-135m": ("smollm2-135m.yaml", smollm2, "SmolLM2-135M"),
          "moe-tiny": ("moe-tiny.yaml", moe_tiny, "moe-tiny (Mixtral's block, 2 of 4 experts)")}

ap = argparse.ArgumentParser()
ap.add_argument("--dltrain", required=True)
ap.add_argument("--nets", required=True)
ap.add_argument("--model", choices=sorted(MODELS), default="gpt2")
ap.add_argument("--batch", type=int, default=4)
ap.add_argument("--context", type=int, default=64)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--steps", type=int, default=5)
ap.add_argument("--no-compile", action="store_true")
ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
ap.add_argument("--dltrain-arg", action="append", default=[],
                help="one more argument for dltrain bench step (repeat it): --dltrain-arg=--tune")
a = ap.parse_args()
net_file, hf_model, title = MODELS[a.model]

torch.set_num_threads(a.threads)
torch.manual_seed(1)


def dltrain():
    out = subprocess.run([a.dltrain, "bench", "step", "--net", a.nets + "/" + net_file, "--context", str(a.context),
                          "--batch", str(a.batch), "--threads", str(a.threads), "--steps", str(a.steps),
                          "--warmup", "2", "--precision", a.precision] + a.dltrain_arg, capture_output=True, text=True,
                         check=True).stdout
    step = float(re.search(r"step time: ([0-9.]+) ms", out).group(1)) / 1e3
    # a bf16 run's share is of the bf16 GEMM peak, which bench step measures under --precision bf16
    peak = re.search(r"bf16 GEMM peak: ([0-9.]+) GFLOP/s", out) or re.search(r"sgemm peak: ([0-9.]+) GFLOP/s", out)
    gflop = float(re.search(r"\(([0-9.]+) GFLOP per step\)", out).group(1))
    mem = re.search(r"planned arena: [0-9]+ bytes \(([0-9.]+) MiB.*parameters ([0-9.]+) MiB", out)
    mfu = re.search(r"^MFU: ([0-9.]+)%", out, re.M)
    return step, gflop, (peak.group(0).split(" peak")[0], float(peak.group(1))) if peak else None, \
        (mem.group(0) if mem else "") + ("; MFU %s%%" % mfu.group(1) if mfu else "")


def pytorch(compiled):
    model = hf_model()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)
    ids = torch.randint(0, model.config.vocab_size, (a.batch, a.context + 1), generator=torch.Generator().manual_seed(1))
    x, y = ids[:, :-1], ids[:, 1:]
    run = torch.compile(model) if compiled else model

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            logits = run(input_ids=x).logits
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), y.reshape(-1))
        loss.backward()
        opt.step()

    for _ in range(2):
        step()
    t = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        t.append(time.perf_counter() - t0)
    return statistics.median(t)


print("%s, batch %d x %d tokens, %d threads, torch %s, %d timed steps (median), %s%s" %
      (title, a.batch, a.context, a.threads, torch.__version__, a.steps, a.precision,
       " (PyTorch under bf16 autocast)" if a.precision == "bf16" else ""))
d, gflop, peak, mem = dltrain()
e = pytorch(False)
d2, _, _, _ = dltrain()
rows = [("dltrain", min(d, d2)), ("PyTorch eager", e)]
if not a.no_compile:
    c = pytorch(True)
    rows.append(("PyTorch torch.compile", c))
best = min(d, d2)
for name, s in rows:
    print("%-22s %8.3f s/step  %6.1f GFLOP/s%s" % (name, s, gflop / s,
          "" if name == "dltrain" else "   dltrain is %.2fx" % (s / best)))
if peak:
    print("dltrain: %.1f%% of the measured %s peak (%.1f GFLOP/s); %s" % (100 * gflop / best / peak[1], peak[0],
                                                                          peak[1], mem))
print("PyTorch peak RSS: %.0f MiB" % (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
