"""ConvFiT Stage 1: response ranking (MNEG, Eq. 1) of the shipped MiniLM on dialogue (context, response) pairs.

  python -m fewshot_nlu.main --config=configs/convfit_stage1.py --workdir=runs/convfit_stage1
then Stage 2 on top of it:
  python -m fewshot_nlu.main --config=configs/convfit_banking77.py --workdir=runs/s1s2 \
      --config.model.name=runs/convfit_stage1/export

Paper (§3): 2 epochs, batch 256, sentence-transformers defaults (AdamW 2e-5, 10% warm-up, linear decay, D = 20).
Here the data is SGD + Taskmaster-4 (``dialogue_pairs/context_response``, ~75k pairs) instead of ~2% of Reddit;
on pods use ``--config.data.builder=reddit_conversational --config.data.raw_dir=gs://...``, a large global batch
and ``--config.loss.cache_chunks`` (gradient caching) to bound memory. On a CPU, cap the run with
``--config.train.max_steps``.
"""

import ml_collections

from fewshot_nlu.defaults import common


def get_config():
  config = common.add_training(common.base("convfit_stage1"))
  config.model.max_length = 64  # context and response, each
  config.data.builder = "dialogue_pairs"
  config.data.builder_config = "context_response"
  config.data.train_split = "train"
  config.data.eval_split = "heldout"
  config.train.batch_size = 256
  config.train.epochs = 2
  config.train.max_steps = 0  # > 0: stop after this many steps (the schedule spans them)
  config.train.save_every = 200
  config.train.packing = False  # pack utterances several to a row (block-diagonal attention; not with cache_chunks)
  config.loss = ml_collections.ConfigDict()
  config.loss.scale = 20.0  # D in S(c, r) = D * cos(c, r); sentence-transformers' default
  config.loss.exclude_positive = True  # Eq. (1) as printed; False = sentence-transformers' MNRL
  config.loss.cache_chunks = 0  # > 0: gradient-cached MNEG over this many chunks of the global batch
  config.eval.max_pairs = 2000  # held-out pairs for response selection (groups of 100)
  config.eval.before_training = True
  return config
