"""Predict with any exported model (``fewshot_nlu.models.load`` dispatches on the kind its metadata records),
showing the evidence behind each prediction:

  * ``intent_model`` (baseline, ConvFiT k-NN / MLP): the intent and the nearest training examples;
  * ``qaid``: the intent and the best-scoring intent names (and example queries) with their Score;
  * ``multi_label`` (Multi-ConvFiT): the set of intents at or above their thresholds and the most likely
    intents' probabilities;
  * ``slot_filler`` (Retriever, ``fold{k}/export``): the slots, each with the support span it retrieved, and
    the BIO tags (texts are split on whitespace into words).

  python -m fewshot_nlu.predict --model runs/convfit_banking77/export "I lost my card" "where is my money?"
  python -m fewshot_nlu.predict --model DIR --input queries.txt --output predictions.jsonl
  python -m fewshot_nlu.predict --model DIR --add more_examples.tsv --save "I lost my card"

``--reject`` (single-label intent models: ``intent_model``, ``qaid``) answers ``out_of_scope`` where the rejection
score is below the threshold calibrated when the model was exported (``models.rejection``: the 10th percentile of
held-out in-scope utterances' scores: a development split's, or ConvFiT's training examples held out of a second
Stage 2; else of the training examples' leave-one-out scores), or below
``--threshold T``. Rejection scores: k-NN, the summed cosine of the voting neighbours (k = 1: the cosine, in
[-1, 1]); MLP / logistic regression, the cosine of the nearest example (the intent and its shown score stay the
head's; exports calibrated before 2026-11-25 threshold its probability); QAID, Eq. (1)'s late-interaction Score in
[-1, 1]. An export made before thresholds were calibrated needs --threshold.

  python -m fewshot_nlu.predict --model DIR --reject "what is the meaning of life"
  python -m fewshot_nlu.predict --model DIR --reject --threshold 0.6 --input queries.txt

``--quantize int8`` runs the model's encoders' dense layers as int8 products (``encoders.quantize``): a faster
single utterance on a CPU, predictions close to float32's (bench/results/quantize.md).

``--support`` (slot filler) swaps in another support set: a ``seq.in``/``seq.out`` folder or a JSONL of
``{"tokens": [...], "tags": [...]}`` (``data.support``), so one trained span encoder fills the
slots of a new domain. ``--add`` adds labelled examples (a TSV of ``text<TAB>label`` lines; for a slot filler ``text<TAB>BIO tags``,
one tag per word) before predicting, without retraining: inference-time pool augmentation (ConvFiT Figure 6),
new intents / slot labels; ``--save`` writes them back into the model. A multi-label model refuses ``--add``
(its classifier would need retraining).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

from fewshot_nlu.encoders import QUANTIZATIONS, RUNTIMES


def read_examples(path: pathlib.Path) -> tuple[list[str], list[str]]:
  from fewshot_nlu.data.tsv import read_two_columns
  rows = read_two_columns(path, ("text", "label"))
  return [r[0] for r in rows], [r[1] for r in rows]


def load_model(directory: str, quantize: str | None = None, runtime: str | None = None):
  """The model exported in ``directory``, whatever its kind (``models.registry``), its encoders quantised as
  ``quantize`` says (``encoders.quantize``) and run by ``runtime`` (``encoders.onnx_inference``)."""
  from fewshot_nlu import models
  return models.load(directory, quantize=quantize, runtime=runtime)


def describe(text: str, prediction) -> list[str]:
  """Human-readable lines for one prediction: the decision, then its evidence."""
  from fewshot_nlu.models import protocol
  lines = [text]
  if hasattr(prediction, "entities"):  # a joint NLU parse (models.nlu_model.Parse)
    rejected = ""
    if prediction.rejection and prediction.rejection["rejected"]:
      rejected = (f"; best intent: {prediction.ranking[0][0] if prediction.ranking else '?'}, rejection score "
                  f"{prediction.rejection['score']:.3f} vs threshold {prediction.rejection['threshold']:.3f}")
    intent = f"{prediction.intent}  ({prediction.confidence:.3f}{rejected})" if prediction.intent else "(no intent)"
    lines.append(f"  -> {intent}")
    for e in prediction.entities:
      role = f" ({e['role']})" if "role" in e else ""
      lines.append(f"     {e['confidence']:.3f}  {e['entity'] + role:<28}  {text[e['start']:e['end']]!r} "
                   f"[{e['start']}:{e['end']}] = {e['value']!r}   <- {e['evidence']['text']!r} in "
                   f"{e['evidence']['utterance']!r}")
    if not prediction.entities:
      lines.append("     (no entity)")
  elif isinstance(prediction, protocol.SlotPrediction):
    lines.append(f"  -> {' '.join(prediction.tags) or '(no words)'}")
    for s in prediction.slots:
      lines.append(f"     {s.score:.3f}  {s.label:<28}  {s.text}   <- {s.evidence.text!r} "
                   f"({s.evidence.score:.3f}) in {s.support_utterance!r}")
    if not prediction.slots:
      lines.append("     (no slot)")
  elif isinstance(prediction, protocol.LabelSetPrediction):
    lines.append(f"  -> {' + '.join(prediction.labels) or '(no intent)'}")
    for label, p in prediction.probabilities.items():
      lines.append(f"     {p:.3f}  {label}{'  *' if label in prediction.labels else ''}")
  else:
    judged = ("" if prediction.threshold is None else
              f"; rejection score {prediction.rejection_score:.3f} vs threshold {prediction.threshold:.3f}")
    best = f"; best intent: {prediction.best_label}" if prediction.best_label is not None else ""
    lines.append(f"  -> {prediction.label}  ({prediction.score:.3f}{best}{judged})")
    lines += [f"     {n.score:.3f}  {n.label:<28}  {n.text}" for n in prediction.neighbours]
  return lines


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("texts", nargs="*", help="utterances to classify")
  parser.add_argument("--model", required=True, help="an export/ folder written by a training run")
  parser.add_argument("--input", help="a file with one utterance per line (instead of / besides TEXTS); a blank "
                      "line gets an explicit empty answer, so output line i answers input line i")
  parser.add_argument("--output", help="write one JSON object per utterance to this file")
  parser.add_argument("--neighbours", type=int, default=3,
                      help="evidence to show: nearest examples / intent names / most likely intents (default 3)")
  parser.add_argument("--add", help="a TSV of text<TAB>label examples (slot filler: text<TAB>BIO tags) to add "
                      "before predicting")
  parser.add_argument("--support", help="slot filler: answer from this support set instead of the exported one "
                      "(a folder with seq.in + seq.out, or a JSONL of {\"tokens\", \"tags\"}; no retraining)")
  parser.add_argument("--reject", action="store_true",
                      help="single-label intent models: answer out_of_scope below the model's calibrated threshold")
  parser.add_argument("--threshold", type=float, help="with --reject (implied): this score threshold instead of the "
                      "calibrated one (on the model's own scale, see above)")
  parser.add_argument("--save", action="store_true", help="with --add / --support: save the examples into --model")
  parser.add_argument("--quantize", choices=QUANTIZATIONS,
                      help="run the encoders' dense layers as int8 products: "
                      "faster at batch 1 on a CPU, predictions close to float32's (encoders.quantize)")
  parser.add_argument("--runtime", choices=RUNTIMES, default="xla",
                      help="onnxruntime: run the encoders through ONNX Runtime, the same predictions, "
                      "faster for a few utterances on a CPU (needs the onnxruntime extra; encoders.onnx_inference)")
  args = parser.parse_args(argv)
  os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

  from fewshot_nlu import errors
  texts = list(args.texts)
  try:
    empty = [i + 1 for i, text in enumerate(texts) if not text.strip()]
    if empty:
      raise errors.UserError(f"utterance {empty[0]} on the command line is empty; give words to classify")
    output = check_output_path(args.output) if args.output else None
    if args.input:
      from fewshot_nlu.data.intent_folder import read_lines
      texts += read_lines(pathlib.Path(args.input), keep_blank=True)  # blank lines get an empty answer
    extra = read_examples(pathlib.Path(args.add)) if args.add else None
    model = load_model(args.model, args.quantize, args.runtime)
    if args.support:
      if getattr(model, "kind", None) != "slot_filler":
        raise ValueError(f"--support: {args.model} is a {getattr(model, 'kind', '?')} model; only a slot filler "
                         "(a Retriever fold's export) answers from a support set")
      from fewshot_nlu.data.support import read_support
      model.replace_support(read_support(args.support))
      print(f"support set: {len(model)} utterances from {args.support} ({len(model.labels)} slot labels)",
            file=sys.stderr)
    if extra:
      model.add_examples(*extra)
      print(f"added {len(extra[0])} examples ({len(model)} in all)", file=sys.stderr)
    if (extra or args.support) and args.save:
      model.save_rows(args.model)
    rejecting = {}
    if args.reject or args.threshold is not None:
      rejecting = {"reject": True, "threshold": rejection_threshold(model, args)}
  except (OSError, ValueError, NotImplementedError, errors.UserError) as e:
    print(errors.one_line(e) or f"error: {e}", file=sys.stderr)
    return errors.EXIT_USER_ERROR
  if not texts:
    return 0
  from fewshot_nlu.models.protocol import EMPTY
  predicted = model.predict(texts, neighbours=args.neighbours, **rejecting)  # a blank --input line: EMPTY
  if output is None:
    for text, prediction in zip(texts, predicted):
      print("\n".join(describe(text, prediction) if prediction is not EMPTY else [repr(text), "  -> (empty line)"]))
    return 0
  tmp = output.with_name(f".{output.name}.tmp")
  with open(tmp, "w", encoding="utf-8") as out:
    for text, prediction in zip(texts, predicted):
      out.write(json.dumps({"text": text, **prediction.to_dict()}, ensure_ascii=False) + "\n")
  os.replace(tmp, output)
  empty = sum(p is EMPTY for p in predicted)
  print(f"wrote {len(texts)} predictions to {args.output} (line i answers input i; "
        f"{empty} empty lines answered {{\"empty\": true}})", file=sys.stderr)
  return 0


def rejection_threshold(model, args) -> float:
  """The threshold ``--reject`` uses (``--threshold`` or the model's calibrated one), announced on stderr; a model
  that cannot reject, or has no threshold, is an error."""
  from fewshot_nlu import errors
  from fewshot_nlu.models import rejection
  kind = getattr(model, "kind", "?")
  if not hasattr(model, "calibrate_rejection"):
    why = ("; it answers no intent when none reaches its threshold" if kind == "multi_label" else "")
    raise errors.UserError(f"--reject: {args.model} is a {kind} model; out-of-scope rejection is for single-label "
                           f"intent models (intent_model, qaid){why}")
  threshold = rejection.resolve_threshold(model.rejection, args.threshold, f"--model {args.model}")
  source = "given" if args.threshold is not None else model.rejection.describe()
  print(f"out_of_scope below score {threshold:.4f} ({source})", file=sys.stderr)
  return threshold


def check_output_path(output: str) -> pathlib.Path:
  """``--output`` checked before anything is computed: its folder exists and is writable, and it is no folder."""
  from fewshot_nlu import errors
  path = pathlib.Path(output)
  if path.is_dir():
    raise errors.UserError(f"--output {output}: is a directory; give a file name")
  if not path.parent.resolve().is_dir():
    raise errors.UserError(f"--output {output}: folder {path.parent} does not exist")
  if not os.access(path.parent.resolve(), os.W_OK):
    raise errors.UserError(f"--output {output}: folder {path.parent} is not writable")
  return path


if __name__ == "__main__":
  sys.exit(main())
