"""Default job: ConvFiT on BANKING77 10-shot, the fast setting (about 2 minutes on 2 CPU cores).

Run (from the repository root, data in ../shared/data or $FEWSHOT_NLU_DATA):
  python -m fewshot_nlu.main --config=configs/default.py --workdir=runs/default
Overrides, e.g.:
  --config.data.builder=hwu64 --config.train.frozen_prefix_layers=-1 --config.mesh.data=8
Your own data (one subfolder per split, each with seq.in + label; a ``valid`` one calibrates out-of-scope
rejection, else add --config.eval.calibration_split=):
  --config.data.builder=intent_folder --config.data.raw_dir=path/to/folder --config.data.train_split=train
  --config.data.eval_split=test

ConvFiT's shipped BANKING77 10-shot config (``configs/convfit_banking77.py``; hyper-parameters and their
deviations from the paper in ``fewshot_nlu/defaults/convfit_base.py``) with one change for a first run's
wall-clock: ``train.frozen_prefix_layers = 2`` freezes the embeddings and the lower 2 of MiniLM's 6 layers and
computes their output once per utterance. Measured (3 seeds each, alone on this 2-core CPU; README "Default job",
bench/results/peers.md): 86.63 +- 0.23 test accuracy in 1.7 min fit, against 86.65 +- 0.15 in 2.2 min for full
fine-tuning (``--config.train.frozen_prefix_layers=-1``, or ``configs/convfit_banking77.py``). The in-batch ranking baseline
that was the default job before is ``configs/intent_mneg.py``.
"""

import ml_collections

from fewshot_nlu.defaults import convfit_base


def get_config() -> ml_collections.ConfigDict:
  config = convfit_base.get_config("banking77", "10")
  config.train.frozen_prefix_layers = 2  # embeddings + 2 layers frozen, their outputs computed once
  return config
