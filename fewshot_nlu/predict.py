"""Predict intents with an exported model, showing the evidence behind each prediction: the nearest training
examples (ConvFiT, Multi-ConvFiT k-NN / MLP exports) or the best-scoring intent names with their
late-interaction scores (QAID exports).

  python -m fewshot_nlu.predict --model runs/convfit_banking77/export "I lost my card" "where is my money?"
  python -m fewshot_nlu.predict --model DIR --input queries.txt --output predictions.jsonl
  python -m fewshot_nlu.predict --model DIR --add more_examples.tsv --save "I lost my card"

``--add`` indexes more labelled examples (a TSV of ``text<TAB>label`` lines) before predicting: inference-time
pool augmentation (ConvFiT Figure 6), no retraining; ``--save`` writes the grown index back into the model.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys


def read_examples(path: pathlib.Path) -> tuple[list[str], list[str]]:
  from fewshot_nlu.data.tsv import read_two_columns
  rows = read_two_columns(path, ("text", "label"))
  return [r[0] for r in rows], [r[1] for r in rows]


def load_model(directory: str):
  """The model exported in ``directory``: a QAID model (``qaid.json``: intent names retrieved by late
  interaction) or a k-NN / MLP ``IntentModel``."""
  from fewshot_nlu.methods.qaid import model as qaid_model
  if (pathlib.Path(directory) / qaid_model.META_FILE).exists():
    return qaid_model.QAIDModel.load(directory)
  from fewshot_nlu.models.intent_model import IntentModel
  return IntentModel.load(directory)


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("texts", nargs="*", help="utterances to classify")
  parser.add_argument("--model", required=True, help="an export/ folder written by a training run")
  parser.add_argument("--input", help="a file with one utterance per line (instead of / besides TEXTS)")
  parser.add_argument("--output", help="write one JSON object per utterance to this file")
  parser.add_argument("--neighbours", type=int, default=3, help="nearest examples to show (default 3)")
  parser.add_argument("--add", help="a TSV of text<TAB>label examples to index before predicting")
  parser.add_argument("--save", action="store_true", help="with --add: save the grown index into --model")
  args = parser.parse_args(argv)
  os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

  texts = list(args.texts)
  try:
    if args.input:
      texts += [l.strip() for l in pathlib.Path(args.input).read_text(encoding="utf-8").splitlines() if l.strip()]
    extra = read_examples(pathlib.Path(args.add)) if args.add else None
    model = load_model(args.model)
  except (OSError, ValueError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  if extra:
    model.add_examples(*extra)
    print(f"indexed {len(extra[0])} more examples ({len(model)} in all)", file=sys.stderr)
    if args.save:
      model.save_rows(args.model)
  if not texts:
    return 0
  predictions = model.predict(texts, neighbours=args.neighbours)
  out = open(args.output, "w", encoding="utf-8") if args.output else None
  for text, p in zip(texts, predictions):
    if out:
      out.write(json.dumps({"text": text, "label": p.label, "score": p.score, "neighbours": [
          {"text": n.text, "label": n.label, "score": n.score} for n in p.neighbours]}, ensure_ascii=False) + "\n")
    else:
      print(f"{text}\n  -> {p.label}  ({p.score:.3f})")
      for n in p.neighbours:
        print(f"     {n.score:.3f}  {n.label:<28}  {n.text}")
  if out:
    out.close()
    print(f"wrote {len(texts)} predictions to {args.output}", file=sys.stderr)
  return 0


if __name__ == "__main__":
  sys.exit(main())
