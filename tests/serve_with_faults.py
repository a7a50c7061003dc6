"""``python -m tests.serve_with_faults MARKER [serve arguments]``: ``python -m fewshot_nlu.serve`` with two faults
planted for serve/test_main, and nothing else changed:

  * a model bug: ``predict`` raises RuntimeError when asked about the text ``__boom__``;
  * a slow persist: the first ``vectors.npy`` written while serving (by ``save_rows``, the new index's first
    file) is written for real, then the process creates MARKER and sleeps, so the test can kill -9 it with the
    new index half written.
"""

from __future__ import annotations

import pathlib
import sys
import time

import numpy as np


def main(argv: list[str]) -> int:
  marker, serve_args = pathlib.Path(argv[0]), argv[1:]
  real_save = np.save

  def slow_save(file, array, *args, **kwargs):
    real_save(file, array, *args, **kwargs)
    if pathlib.Path(file).name == "vectors.npy":
      marker.write_text("persisting\n")
      time.sleep(600)

  np.save = slow_save  # fewshot_nlu.index calls np.save at write time

  from fewshot_nlu.models.intent_model import IntentModel
  real_predict = IntentModel.predict

  def predict(self, texts, **kwargs):
    if "__boom__" in texts:
      raise RuntimeError("planted bug: __boom__")
    return real_predict(self, texts, **kwargs)

  IntentModel.predict = predict

  from fewshot_nlu.serve.__main__ import main as serve
  return serve(serve_args)


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
