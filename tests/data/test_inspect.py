"""``python -m fewshot_nlu.data.inspect``: sizes, labels and examples of a built dataset (HWU64 in shared/data)."""

import pytest

from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.skipif(not SHARED_DATA.exists(), reason=f"{SHARED_DATA} not present")


def test_inspect_prints_sizes_labels_and_examples(tmp_path, capsys):
  from fewshot_nlu.data import inspect
  inspect.main(["hwu64", "--raw-dir", str(SHARED_DATA / "HWU64"), "--data-dir", str(tmp_path),
                "--split", "train_5", "--split", "test"])
  out = capsys.readouterr().out
  assert "train_5" in out and "320 examples, 64 labels" in out and "1076 examples" in out
  assert out.count('{"index"') == 3
