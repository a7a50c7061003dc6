"""Default job: ConvFiT on BANKING77 10-shot (about 3 minutes on 2 CPU cores: 2.2 of fitting).

Run (from the repository root, data in ../shared/data or $FEWSHOT_NLU_DATA):
  python -m fewshot_nlu.main --config=configs/default.py --workdir=runs/default
Overrides, e.g.:
  --config.data.builder=hwu64 --config.train.frozen_prefix_layers=2 --config.mesh.data=8
Your own data (one subfolder per split, each with seq.in + label; without a ``valid`` one the run fits itself
to the splits it finds, with one warning):
  --config.data.builder=intent_folder --config.data.raw_dir=path/to/folder

ConvFiT's shipped BANKING77 10-shot config, exactly ``configs/convfit_banking77.py`` (hyper-parameters and their
deviations from the paper in ``fewshot_nlu/defaults/convfit_base.py``) and exactly what ``fewshot_nlu.fit(...,
method="convfit")`` trains on the same examples: one ConvFiT default everywhere. Measured (3 seeds each, alone on
this 2-core CPU; docs/results.md "Default job", bench/results/peers.md): 86.65 +- 0.15 test accuracy in 2.2 min of fit.
The faster alternative ``--config.train.frozen_prefix_layers=2`` (embeddings + 2 layers frozen, their outputs
computed once) gives 86.63 +- 0.23 in 1.7 min on BANKING77 but costs 1-2 points on small pools
(bench/results/small_bots_notes.md), so it is not the default. The in-batch ranking baseline that was the default
job before is ``configs/intent_mneg.py``.
"""

import ml_collections

from fewshot_nlu.defaults import convfit_base


def get_config() -> ml_collections.ConfigDict:
  return convfit_base.get_config("banking77", "10")
