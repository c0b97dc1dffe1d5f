"""Times PyTorch's forward of a GPT-2-small-shaped model (random weights: the time does not depend on their values)
on one thread, for bench/ort-levels.ts: prints {"forward_ms": <median>, ...} as its last line.

    /work/ref-venv/bin/python scripts/reference/time_forward.py --batch 8 --tokens 128 --rounds 2
"""
import argparse
import json
import statistics
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(attn_implementation="eager")).eval()
    ids = torch.randint(0, 50257, (a.batch, a.tokens))
    times = []
    cpu = []
    with torch.inference_mode():
        model(ids, use_cache=False)  # warm-up
        for _ in range(a.rounds):
            t = time.perf_counter()
            c = time.process_time()
            model(ids, use_cache=False)
            times.append((time.perf_counter() - t) * 1000)
            cpu.append((time.process_time() - c) * 1000)
    print(json.dumps({"forward_ms": round(statistics.median(times), 2), "forward_cpu_ms": round(statistics.median(cpu), 2),
                      "runs_ms": [round(x, 2) for x in times],
                      "threads": torch.get_num_threads(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
