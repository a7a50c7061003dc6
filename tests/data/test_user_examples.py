"""``fit``'s input forms (``data.user_examples``): lists, CSV, JSON lines and a DataFrame give the very same
training files."""

import json

import pytest

from fewshot_nlu.data import user_examples
from tests.api_helpers import LABELS, TEXTS


def _same_table(examples_a, examples_b, root):
  return (user_examples.write_table({"train": examples_a}, root) ==
          user_examples.write_table({"train": examples_b}, root))


def test_lists_csv_jsonl_and_dataframe_give_the_same_training_files(tmp_path):
  from_lists = user_examples.read(TEXTS, LABELS)
  csv = tmp_path / "t.csv"
  csv.write_text("id,text,label\n" + "".join(f'{i},"{t}",{l}\n' for i, (t, l) in enumerate(zip(TEXTS, LABELS))))
  jsonl = tmp_path / "t.jsonl"
  jsonl.write_text("".join(json.dumps({"text": t, "label": l}) + "\n" for t, l in zip(TEXTS, LABELS)))
  forms = [user_examples.read(csv), user_examples.read(str(jsonl))]
  pandas = pytest.importorskip("pandas")
  forms.append(user_examples.read(pandas.DataFrame({"utterance": TEXTS, "intent": LABELS}), text_column="utterance",
                                  label_column="intent"))
  for examples in forms:
    assert (examples.texts, examples.labels, examples.multi_label) == (from_lists.texts, from_lists.labels, False)
    assert _same_table(examples, from_lists, tmp_path / "cache")
  folder = user_examples.write_table({"train": from_lists}, tmp_path / "cache")
  mtime = (folder / "train.jsonl").stat().st_mtime_ns
  assert user_examples.write_table({"train": forms[0]}, tmp_path / "cache") == folder
  assert (folder / "train.jsonl").stat().st_mtime_ns == mtime  # same examples: the file is left alone
