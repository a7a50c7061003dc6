"""Do sentence-transformers and fewshot_nlu give the same vectors for our exports?

  python bench/st_compat.py --st-python /work/stvenv/bin/python --convfit-export /tmp/st_convfit/export --write

Each export is encoded twice on the same utterances (the first ``--n``, default 200, of CLINC150's test split):
by this project (the export's own model: ``fewshot_nlu.models.load(export).encoder`` for a model export,
``SentenceEncoder.from_pretrained`` for an encoder-only one) and by ``SentenceTransformer(export)`` from the
module files the export carries (``encoders.st_modules``). sentence-transformers needs torch, which this project
never installs, so it runs in a subprocess under ``--st-python`` (a separate venv, as ``bench/encode.py`` does).
Reported per export: its modules, the cosine of each pair of vectors (minimum and mean; target >= 0.9999) and the
largest absolute difference (exports without Normalize are compared unnormalised too).

Exports checked:
  * ``convfit``: a ConvFiT Stage 2 export (mean pooling, the 512-d tanh projection, Normalize), made by a short
    run of the CLI (``--convfit-export``; see the command in the results file);
  * ``plain``: the packaged all-MiniLM-L6-v2 re-exported by ``SentenceEncoder.save`` (mean pooling, Normalize);
  * ``cls_dense``: the same encoder with CLS pooling, a random tanh projection and no Normalize (the other
    branches of the module files).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

from encode import DEFAULT_DATA, load_sentences
from runner import REPO

TARGET = 0.9999


def st_vectors(export: pathlib.Path, sentences: list[str]) -> np.ndarray:
  """Runs inside the torch venv: ``SentenceTransformer(export).encode``."""
  import sentence_transformers
  model = sentence_transformers.SentenceTransformer(str(export), device="cpu")
  print(f"{export}: {model}", file=sys.stderr)
  return model.encode(sentences, batch_size=32, convert_to_numpy=True, show_progress_bar=False)


def st_in_subprocess(st_python: str, export: pathlib.Path, sentences_file: pathlib.Path) -> tuple[np.ndarray, str]:
  with tempfile.TemporaryDirectory() as tmp:
    out = pathlib.Path(tmp) / "vectors.npy"
    cmd = [st_python, __file__, "--backend", "st", "--export", str(export), "--sentences", str(sentences_file),
           "--out", str(out)]
    subprocess.run(cmd, check=True, cwd=tmp)
    version = subprocess.run([st_python, "-c", "import sentence_transformers, torch; print("
                              "f'sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}')"],
                             check=True, capture_output=True, text=True).stdout.strip()
    return np.load(out), version


def our_vectors(export: pathlib.Path, sentences: list[str]) -> np.ndarray:
  from fewshot_nlu import models
  from fewshot_nlu.encoders.sentence import SentenceEncoder
  try:
    encoder = models.load(export).encoder
  except ValueError:  # an encoder-only export
    encoder = SentenceEncoder.from_pretrained(str(export))
  return np.asarray(encoder.encode(sentences), np.float64)


def make_encoder_exports(root: pathlib.Path) -> dict[str, pathlib.Path]:
  """``plain`` and ``cls_dense`` (module docstring) under ``root``."""
  import jax
  from fewshot_nlu.encoders import projection
  from fewshot_nlu.encoders.sentence import SentenceEncoder
  base = SentenceEncoder.from_pretrained("minilm-l6", pooling_mode="mean", max_length=64)
  plain = base.save(root / "plain")
  dense = jax.device_get(projection.init(jax.random.key(0), base.cfg.hidden_size, 256))
  cls_dense = SentenceEncoder(base.cfg, base.params, base.tokenizer, pooling_mode="cls", normalize=False,
                              max_length=64, projection=dense).save(root / "cls_dense")
  return {"plain": plain, "cls_dense": cls_dense}


def modules_of(export: pathlib.Path) -> str:
  modules = json.loads((export / "modules.json").read_text())
  names = []
  for m in modules:
    kind = m["type"].rsplit(".", 1)[1]
    if kind == "Pooling":
      config = json.loads((export / m["path"] / "config.json").read_text())
      kind += "(" + next(k.split("_")[2] for k, v in config.items() if k.startswith("pooling_mode_") and v) + ")"
    if kind == "Dense":
      config = json.loads((export / m["path"] / "config.json").read_text())
      kind += f"({config['in_features']}->{config['out_features']}, {config['activation_function'].rsplit('.', 1)[1]})"
    names.append(kind)
  return " > ".join(names)


def compare(ours: np.ndarray, theirs: np.ndarray) -> dict:
  theirs = theirs.astype(np.float64)
  cos = np.sum(ours * theirs, -1) / (np.linalg.norm(ours, axis=-1) * np.linalg.norm(theirs, axis=-1))
  return {"n": len(ours), "dim": ours.shape[1], "min_cos": float(cos.min()), "mean_cos": float(cos.mean()),
          "max_abs_diff": float(np.abs(ours - theirs).max())}


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--st-python", default=sys.executable, help="python of a venv with sentence-transformers")
  parser.add_argument("--convfit-export", help="a ConvFiT run's export/ folder")
  parser.add_argument("--n", type=int, default=200)
  parser.add_argument("--data-dir", default=DEFAULT_DATA)
  parser.add_argument("--write", action="store_true", help="write bench/results/st_compat.md")
  parser.add_argument("--backend", choices=["compare", "st"], default="compare", help=argparse.SUPPRESS)
  parser.add_argument("--export", help=argparse.SUPPRESS)
  parser.add_argument("--sentences", help=argparse.SUPPRESS)
  parser.add_argument("--out", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.backend == "st":  # the subprocess, in the torch venv
    sentences = json.loads(pathlib.Path(args.sentences).read_text())
    np.save(args.out, st_vectors(pathlib.Path(args.export), sentences))
    return

  sys.path.insert(0, str(REPO))
  sentences = load_sentences(args.data_dir, args.n)
  rows, failed = [], []
  with tempfile.TemporaryDirectory() as tmp:
    tmp = pathlib.Path(tmp)
    sentences_file = tmp / "sentences.json"
    sentences_file.write_text(json.dumps(sentences))
    exports = {}
    if args.convfit_export:
      exports["convfit"] = pathlib.Path(args.convfit_export)
    exports.update(make_encoder_exports(tmp))
    version = ""
    for name, export in exports.items():
      theirs, version = st_in_subprocess(args.st_python, export, sentences_file)
      result = {"export": name, "modules": modules_of(export), **compare(our_vectors(export, sentences), theirs)}
      print(json.dumps(result))
      rows.append(result)
      if result["min_cos"] < TARGET:
        failed.append(name)
  if args.write:
    write(rows, version, args)
  if failed:
    raise SystemExit(f"cosine below {TARGET} for: {', '.join(failed)}")


def write(rows: list[dict], version: str, args) -> None:
  import jax
  command = "python bench/st_compat.py " + " ".join(a for a in sys.argv[1:])
  lines = [
      "# sentence-transformers reads our exports",
      "",
      f"`SentenceTransformer(export).encode` ({version}, CPU) against this project's own encoder of the export "
      f"(jax {jax.__version__}) on the first {args.n} utterances of CLINC150's test split; cosine of each pair "
      f"of vectors (target >= {TARGET}).",
      "",
      "```bash",
  ]
  if args.convfit_export:
    lines += ["# the ConvFiT export: a 5-step Stage 2 run (enough to make a real export with its projection)",
              "python -m fewshot_nlu.main --config=configs/convfit_banking77.py:10 --workdir=/tmp/st_convfit "
              "--config.train.max_steps=5 --config.eval.before_training=False"]
  lines += [command, "```", "",
            "| export | modules | dim | min cosine | 1 - min cosine | 1 - mean cosine | max abs diff |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
  lines += [f"| {r['export']} | {r['modules']} | {r['dim']} | {r['min_cos']:.7f} | {1 - r['min_cos']:.1e} | "
            f"{1 - r['mean_cos']:.1e} | {r['max_abs_diff']:.2e} |" for r in rows]
  lines += ["", "`plain` is the packaged all-MiniLM-L6-v2 saved by `SentenceEncoder.save`; `cls_dense` the same "
            "encoder with CLS pooling, a random 256-d tanh projection and no Normalize (so its vectors are compared "
            "unnormalised too: max abs diff).", ""]
  (REPO / "bench" / "results" / "st_compat.md").write_text("\n".join(lines))


if __name__ == "__main__":
  main()
