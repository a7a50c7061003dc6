"""User errors in one line (``errors``): a full disk even when wrapped, a bad data file named by file and line."""

import pytest

from fewshot_nlu import errors, main
from tests import tiny
from tests.test_main import _toy_config, _toy_dataset


def test_a_full_disk_is_one_line_even_when_wrapped():
  import errno
  try:
    try:
      raise OSError(errno.ENOSPC, "No space left on device", "/runs/x/checkpoints/4/state")
    except OSError as e:
      raise RuntimeError("orbax: save failed") from e
  except RuntimeError as wrapped:
    assert errors.one_line(wrapped).startswith("error: /runs/x/checkpoints/4/state: no space left on device; free")
  assert errors.one_line(RuntimeError("a bug")) is None
  # orbax's writer thread: tensorstore's message in a ValueError, no OSError behind it (seen on a full disk)
  orbax = ValueError('RESOURCE_EXHAUSTED: Error writing "opt_state.count/0" in OCDBT database at local file '
                     '"/runs/y/checkpoints/1.orbax-checkpoint-tmp/state/ocdbt.process_0/": Failed writing: '
                     '"/runs/y/checkpoints/1.orbax-checkpoint-tmp/state/d/f6": Failed to write 165789696 bytes to '
                     "file 9: No space left on device [os_error_code='28']")
  assert errors.one_line(orbax) == ("error: /runs/y/checkpoints/1.orbax-checkpoint-tmp/state/ocdbt.process_0/: no "
                                    "space left on device; free some space (or use a --workdir on another disk) "
                                    "and rerun: the run resumes from its last checkpoint")


def test_a_bad_data_file_is_a_data_error_naming_file_and_line(tmp_path, tiny_bert_dir):
  corpus = tiny.CORPUS
  data = _toy_dataset(tmp_path / "data", {"bank": corpus[:3], "music": corpus[3:6]}, {"bank": corpus[4:5]})
  seq_in = data / "TOY" / "train" / "seq.in"
  lines = seq_in.read_text().splitlines()
  lines[1] = ""
  seq_in.write_text("".join(line + "\n" for line in lines))
  with pytest.raises(errors.DataError) as info:
    main.run(_toy_config(data, tiny_bert_dir), tmp_path / "run")
  assert errors.one_line(info.value) == f"error: {seq_in}:2: empty line (every line must hold one example)"
