"""The DSE evaluation suite (prototype intents 1/5-shot on BANKING77, CLINC150, HWU64, SNIPS; CLINC150
out-of-scope detection; response selection top-1/3/10 of 100 on held-out dialogues) for any encoder, untouched.

  python -m fewshot_nlu.main --config=configs/dse_eval.py --workdir=runs/eval_minilm
  python -m fewshot_nlu.main --config=configs/dse_eval.py --workdir=runs/eval_dse --config.model.name=runs/dse/export
Results: ``suite.md`` (tables) and ``suite.json`` / ``results.json`` in the workdir.
"""

from fewshot_nlu.defaults import common
from fewshot_nlu.evaluation import suite


def get_config():
  config = common.base("evaluate")  # no training: the shared sections and the suite's
  config.eval.batch_size = 64
  suite.add_config(config)
  return config
