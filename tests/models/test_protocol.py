"""The export helpers of ``models.protocol`` (and ``workdirs.replace_file``) leave the old file on a failure."""

import pytest

from fewshot_nlu import workdirs
from fewshot_nlu.models import protocol


def test_replace_file_and_write_jsonl_leave_the_old_file_on_failure(tmp_path):
  path = tmp_path / "rows.jsonl"
  protocol.write_jsonl(path, [{"a": 1}])
  with pytest.raises(TypeError):
    protocol.write_jsonl(path, [{"a": 2}, {"b": object()}])  # fails on the second row
  assert protocol.read_jsonl(path) == [{"a": 1}]
  assert [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]  # no temporary file left behind
  workdirs.replace_file(path, "new\n")
  assert path.read_text() == "new\n"


def test_predict_texts_answers_blank_texts_empty_and_hands_per_text_values_of_the_answered_ones():
  calls = []

  def predict(texts, extras=None):
    calls.append((texts, extras))
    return [f"{t}:{e}" for t, e in zip(texts, extras or [None] * len(texts))]

  assert protocol.predict_texts(["a", " ", "b"], predict) == ["a:None", protocol.EMPTY, "b:None"]
  assert protocol.predict_texts(["a", "", "b"], predict, per_text=[1, 2, 3]) == ["a:1", protocol.EMPTY, "b:3"]
  assert calls[-1] == (["a", "b"], [1, 3])
  assert protocol.predict_texts(["", "  "], predict, per_text=[1, 2]) == [protocol.EMPTY] * 2
  assert len(calls) == 2  # nothing to answer: predict not called
  with pytest.raises(ValueError, match="2 texts but 1 per-text values"):
    protocol.predict_texts(["a", "b"], predict, per_text=[1])
