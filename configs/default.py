"""Default job: in-batch ranking fine-tuning of the shipped MiniLM on BANKING77 10-shot, 1-NN evaluation.

Run (from the repository root, data in ../shared/data or $FEWSHOT_NLU_DATA):
  python -m fewshot_nlu.main --config=configs/default.py --workdir=runs/default
Overrides, e.g.:
  --config.data.builder=hwu64 --config.train.epochs=3 --config.mesh.data=8
Your own data (one subfolder per split, each with seq.in + label):
  --config.data.builder=intent_folder --config.data.raw_dir=path/to/folder
"""

import os

import ml_collections


def get_config() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.method = "intent_mneg"
  config.seed = 0
  config.compilation_cache_dir = os.environ.get("FEWSHOT_NLU_JAX_CACHE", "~/.cache/fewshot_nlu/jax")

  config.model = ml_collections.ConfigDict()
  config.model.name = "minilm-l6"  # a directory, a packaged model name, or a Hugging Face hub id
  config.model.pooling = "mean"
  config.model.dtype = "float32"  # "bfloat16" for bf16 compute (params stay float32)
  config.model.max_length = 48  # ConvFiT §3 (Stage 2)

  config.data = ml_collections.ConfigDict()
  config.data.builder = "banking77"  # see fewshot_nlu/data/builders/__init__.py; "intent_folder" for your own
  config.data.dir = os.environ.get("FEWSHOT_NLU_DATA", "../shared/data")  # holds BANKING77/, CLINC150/, ...
  config.data.raw_dir = ""  # a dataset folder of your own (overrides data.dir)
  config.data.tfds_dir = ""  # prepared array_record files; default $FEWSHOT_NLU_TFDS_DIR or ~/tensorflow_datasets
  config.data.train_split = "train_10"
  config.data.eval_split = "test"

  config.train = ml_collections.ConfigDict()
  config.train.batch_size = 32  # global batch
  config.train.epochs = 1
  config.train.max_steps = 0  # > 0: stop after this many steps (the schedule spans them); every method honours it
  config.train.learning_rate = 2e-5
  config.train.warmup_fraction = 0.1
  config.train.decay = "linear"
  config.train.weight_decay = 0.01
  config.train.grad_clip_norm = 1.0  # 0 disables clipping
  config.train.trainable = (".*",)  # regexes over param paths, e.g. ("layer_5/.*",)
  config.train.frozen = ()
  config.train.group_learning_rates = ()  # ((regex, peak learning rate), ...) for params matching a regex
  config.train.save_every = 10
  config.train.keep_checkpoints = 2
  config.train.log_every = 5

  config.loss = ml_collections.ConfigDict()
  config.loss.scale = 20.0  # D in S(c, r) = D * cos(c, r); sentence-transformers' default
  config.loss.exclude_positive = True  # Eq. (1) as printed; False = sentence-transformers' MNRL

  config.eval = ml_collections.ConfigDict()
  config.eval.batch_size = 32
  config.eval.before_training = True  # also report the untouched encoder's 1-NN accuracy

  config.mesh = ml_collections.ConfigDict({"data": -1, "fsdp": 1, "model": 1})
  config.sharding = ml_collections.ConfigDict()
  config.sharding.rules = ((".*", "logical"),)

  config.distributed = ml_collections.ConfigDict()
  config.distributed.enabled = False
  config.distributed.coordinator_address = ""
  config.distributed.num_processes = 0
  config.distributed.process_id = -1
  return config
