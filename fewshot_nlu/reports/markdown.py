"""``report.md``: an intent report as Markdown (percentages with two decimals)."""

from __future__ import annotations

from fewshot_nlu.reports.metrics import Report

TOP_CONFUSIONS = 20


def _pct(x: float) -> str:
  return f"{100 * x:.2f}"


def _cell(text: str | None, width: int = 80) -> str:
  if text is None:
    return ""
  text = " ".join(text.split()).replace("|", "\\|")
  return text if len(text) <= width else text[: width - 1] + "…"


def render(report: Report, *, title: str, files: dict[str, str], silhouettes: dict[str, float] | None = None
           ) -> str:
  """The report as Markdown; ``files``: what the report's other files are (name -> description)."""
  intents = len(report.per_label)
  accuracy = "exact-match accuracy (predicted set = gold set)" if report.multilabel else "accuracy"
  lines = [f"# {title}", "",
           f"{report.examples} utterances, {intents} intents (in the gold labels or the predictions); "
           f"{accuracy} **{_pct(report.accuracy)}%**, macro F1 **{_pct(report.averages['macro']['f1'])}%**.", ""]
  lines += [f"- `{name}`: {what}" for name, what in files.items()]
  if silhouettes:
    lines += ["", "Silhouette of the utterance embeddings by intent (cosine, higher = intents better separated): "
              + ", ".join(f"{name} **{value:.3f}**".replace("nan", "n/a") for name, value in silhouettes.items())
              + "."]
  support = sum(s.support for s in report.per_label)
  lines += ["", "## Averages (%)", "", "| average | precision | recall | F1 | support |",
            "| --- | ---: | ---: | ---: | ---: |"]
  for name, values in report.averages.items():
    lines.append(f"| {name} | {_pct(values['precision'])} | {_pct(values['recall'])} | {_pct(values['f1'])} | "
                 f"{support} |")
  unit = "(intent, utterance) decisions" if report.multilabel else "predictions (single-label: = accuracy)"
  lines += ["", f"Micro pools all {unit}; macro weighs the {intents} intents equally; weighted by support."]
  lines += ["", "## Top confusions", ""]
  if report.multilabel:
    lines += ["Each missed gold intent paired with each intent predicted instead in the same utterance "
              "((none): nothing on that side).", ""]
  shown = report.confusions[:TOP_CONFUSIONS]
  if shown:
    gold_count = {s.label: s.support for s in report.per_label}
    lines += ["| gold | predicted instead | count | % of gold | example |", "| --- | --- | ---: | ---: | --- |"]
    for c in shown:
      share = f"{_pct(c.count / gold_count[c.gold])}" if gold_count.get(c.gold) else "–"
      lines.append(f"| {c.gold} | {c.predicted} | {c.count} | {share} | {_cell(c.example)} |")
    if len(report.confusions) > len(shown):
      lines.append(f"\n({len(report.confusions) - len(shown)} more pairs with fewer confusions.)")
  else:
    lines.append("No confusions.")
  lines += ["", "## Per intent (%, worst F1 first)", "",
            "| intent | precision | recall | F1 | support | predicted |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
  for s in sorted(report.per_label, key=lambda s: (s.f1, s.label)):
    lines.append(f"| {s.label} | {_pct(s.precision)} | {_pct(s.recall)} | {_pct(s.f1)} | {s.support} | "
                 f"{s.predicted} |")
  return "\n".join(lines) + "\n"
