"""Prints a dataset builder's splits: sizes, label counts and three examples.

  python -m fewshot_nlu.data.inspect banking77
  python -m fewshot_nlu.data.inspect nlupp --config banking --split fold0
  python -m fewshot_nlu.data.inspect joint_nlu_folder --raw-dir my_data/   # your own folder
"""

from __future__ import annotations

import argparse
import collections
import json

from fewshot_nlu.data.builders import BUILDERS, base, get_builder

_LABEL_FIELDS = ("label", "labels", "intents", "domain", "source")


def _labels(example: dict) -> list[str]:
  for field in _LABEL_FIELDS:
    if field in example:
      value = example[field]
      return value if isinstance(value, list) else [value]
  return []


def summarize(builder, splits: list[str] | None = None, examples: int = 3, top: int = 5) -> str:
  base.prepare(builder)
  names = splits or sorted(builder.info.splits.keys())
  lines = [f"{builder.name}/{builder.builder_config.name} {builder.version}  ({builder.data_dir})"]
  for split in names:
    data = base.load_split(builder, split)
    counts = collections.Counter(l for e in data for l in _labels(e))
    common = ", ".join(f"{l} {c}" for l, c in counts.most_common(top))
    lines.append(f"  {split:<14} {len(data):>7} examples" +
                 (f", {len(counts)} labels (most common: {common})" if counts else ""))
  first = base.load_split(builder, names[0])
  lines.append(f"first {min(examples, len(first))} examples of {names[0]}:")
  for example in first[:examples]:
    lines.append("  " + json.dumps(example, ensure_ascii=False)[:400])
  return "\n".join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("builder", choices=sorted(BUILDERS))
  parser.add_argument("--config", help="builder config name")
  parser.add_argument("--raw-dir", help="folder with the raw files (default: $FEWSHOT_NLU_DATA/<folder>)")
  parser.add_argument("--data-dir", help="where prepared datasets go (default: $FEWSHOT_NLU_TFDS_DIR)")
  parser.add_argument("--split", action="append", help="only these splits (repeatable)")
  args = parser.parse_args(argv)
  kwargs = {k: v for k, v in (("config", args.config), ("raw_dir", args.raw_dir),
                              ("data_dir", args.data_dir)) if v}
  print(summarize(get_builder(args.builder, **kwargs), args.split))


if __name__ == "__main__":
  main()
