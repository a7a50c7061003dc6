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
