"""``report.md`` of a joint NLU run (``method="nlu"``): what was trained from the examples and how well each entity
type holds up, for a person deciding which examples to add.

Sections: the examples (per intent, per entity type); the intent model (its own ``intents/report.md``, the
out-of-scope threshold); the slot filler (what it learnt, the threshold); each entity type's precision / recall /
F1 in the cross-validation on the examples at the chosen setting (``train.cv_by_entity``: the held-out
utterances' spans, every type pooled over the folds), worst first, and the types with too few examples to learn
from; the cross-validation's F1 per candidate setting; with ``validation=``, the held-out scores
(``predictions.tsv``).
"""

from __future__ import annotations

import collections
import pathlib
from typing import Sequence

FEW_EXAMPLES = 3  # an entity type in fewer training utterances is listed as wanting more


def write_report(workdir: pathlib.Path, results: dict, examples: Sequence) -> pathlib.Path:
  path = pathlib.Path(workdir) / "report.md"
  path.write_text("\n".join(report_lines(results, examples)) + "\n", encoding="utf-8")
  return path


def weakest(results: dict, count: int = 3) -> str:
  """A terminal line's tail: the entity types with the lowest cross-validation F1 (below 50%), or ""."""
  by_entity = (results.get("slots") or {}).get("cv_by_entity") or {}
  weak = sorted((r["f1"], name, r["examples"]) for name, r in by_entity.items() if r["f1"] < 50)[:count]
  if not weak:
    return ""
  return " (weakest entity types in the cross-validation on your examples: " + ", ".join(
      f"{name} F1 {f1:.0f}% from {n} example{'s' * (n != 1)}" for f1, name, n in weak) + ")"


def report_lines(results: dict, examples: Sequence) -> list[str]:
  intents = collections.Counter(e.intent for e in examples if e.intent is not None)
  types = collections.Counter(x.label for e in examples for x in {x.label: x for x in e.entities}.values())
  lines = [f"# Joint NLU from {len(examples)} examples", "",
           f"{len(intents)} intents, {len(types)} entity types; fit took {results.get('intents_seconds', 0):.0f} s "
           f"(intents) + {results.get('slots_seconds', 0):.0f} s (slots).", ""]
  lines += _intent_lines(results, intents)
  lines += _slot_lines(results, types)
  if "slot_f1" in results:
    lines += ["## Held-out examples (`validation=`)", "",
              f"{results['num_eval']} utterances: intent accuracy {_pct(results.get('intent_accuracy'))}, slot F1 "
              f"{_pct(results['slot_f1'])} (precision {_pct(results['slot_precision'])}, recall "
              f"{_pct(results['slot_recall'])}), sentence accuracy {_pct(results['sentence_accuracy'])} (the intent "
              "and every entity right). Each utterance's answer: `predictions.tsv`.", ""]
  return lines


def _intent_lines(results: dict, intents: collections.Counter) -> list[str]:
  if len(intents) < 2:
    return ["## Intents", "", "No intent classifier: the examples hold fewer than 2 intents.", ""]
  training = results.get("intent_training", {})
  lines = ["## Intents", "",
           f"{training.get('method', 'intent model')}, {training.get('variant', '')}; examples per intent: "
           + ", ".join(f"{name} {n}" for name, n in sorted(intents.items())) + ". Its own report: "
           "`intents/report.md`."]
  accuracy = training.get("held_out_half_accuracy")
  if accuracy is not None:
    lines += ["", f"Intent accuracy on the examples held out of a second Stage 2 trained on the other half of each "
                  f"intent's: {_pct(accuracy)} (k-NN on half the examples; new utterances score lower: on "
                  "small bots 0-13.5 points below it, as your examples resemble each other more than your users' "
                  "do; `validation=` gives a real figure)."]
  rejection = training.get("rejection")
  if rejection:
    lines += ["", f"Out of scope below {rejection['threshold']:.3f} ({rejection['rule']}); a rejected text's "
                  "intent is `out_of_scope`."]
  return lines + [""]


def _slot_lines(results: dict, types: collections.Counter) -> list[str]:
  slots = results.get("slots")
  if not slots:
    return ["## Entities", "", "No slot filler: no example holds an entity.", ""]
  learner = {"encoder": "the encoder's layers", "metric": "a span metric"}.get(slots.get("support_mode"), "")
  learnt = (f"{learner} learnt the examples for {slots['support_steps']} steps" if slots.get("support_steps")
            else "retrieval alone (nothing learnt)")
  lines = ["## Entities", "",
           f"Span encoder: {slots['encoder']}; {learnt}; decoding threshold {slots['threshold']} — chosen by "
           f"{slots['how']}.", ""]
  shares = slots.get("cv_f1_by_expected_share") or {}
  if len(shares) > 1:
    share = slots.get("expected_share")
    said = (f"an entity type held by {share:.0%} of an intent's examples is expected of its texts and filled in where "
            "decoding left it out" if share is not None else "none (decoding alone)")
    lines += [f"Expected entities: {said}; cross-validation F1 " + ", ".join(
        f"{'none' if k == 'None' else f'share {k}'} {v:.2f}" for k, v in shares.items()) + ".", ""]
  by_entity = slots.get("cv_by_entity")
  if by_entity:
    lines += ["Each entity type in that cross-validation, at the chosen setting (%, worst F1 first; every "
              "held-out utterance's spans, pooled over the folds):", "",
              "| entity | examples | held-out spans | predicted | right | precision | recall | F1 |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, r in sorted(by_entity.items(), key=lambda kv: (kv[1]["f1"], kv[0])):
      lines.append(f"| {name} | {r['examples']} | {r['gold']} | {r['predicted']} | {r['correct']} | "
                   f"{r['precision']:.2f} | {r['recall']:.2f} | {r['f1']:.2f} |")
    lines.append("")
  few = sorted(name for name, n in types.items() if n < FEW_EXAMPLES)
  if few:
    lines += [f"In fewer than {FEW_EXAMPLES} examples (add some for these first): " + ", ".join(
        f"{name} ({types[name]})" for name in few) + ".", ""]
  steps = slots.get("cv_f1_by_steps")
  if steps:
    lines += ["Cross-validation F1 of each candidate (learner:steps; 0 = retrieval alone), at its best margin, "
              "bonus and threshold:", "", "| setting | F1 |", "| --- | ---: |",
              *(f"| {name} | {f1:.2f} |" for name, f1 in steps.items()), ""]
  return lines


def _pct(value) -> str:
  return "–" if value is None else f"{100 * value:.2f}%"
