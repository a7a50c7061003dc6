"""Config sections shared by the methods' configs. Each method's config takes the sections its code reads and
no others (``fewshot_nlu.config_fields`` makes a field a method ignores an error):

  * ``base(method)``: the method, seed, compilation cache, ``model``, ``data``, ``eval.batch_size`` and
    ``distributed`` sections, which every method reads;
  * ``add_training(config)``: the ``train`` section (optimiser, schedule, checkpoints), the device ``mesh`` and
    the ``sharding`` rules, for the methods that train an encoder;
  * ``mlp_classifier(...)``: the one shape of an MLP head's section (``classifier.mlp``).
"""

import os

import ml_collections


def compilation_cache_dir() -> str:
  """Where compiled programs persist across processes: ``$FEWSHOT_NLU_JAX_CACHE``, else ~/.cache/fewshot_nlu/jax."""
  return os.environ.get("FEWSHOT_NLU_JAX_CACHE", "~/.cache/fewshot_nlu/jax")


def base(method: str) -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.method = method
  config.seed = 0
  config.compilation_cache_dir = compilation_cache_dir()

  config.model = ml_collections.ConfigDict()
  config.model.name = "minilm-l6"  # a directory, a packaged model name, or a Hugging Face hub id
  config.model.pooling = "mean"  # "mean", "cls", "max", or "auto": as a sentence-transformers model declares
  config.model.dtype = "float32"  # "bfloat16" for bf16 compute (params stay float32)
  config.model.max_length = 48

  config.data = ml_collections.ConfigDict()
  config.data.builder = "banking77"  # see fewshot_nlu/data/builders/__init__.py; "intent_folder" for your own
  config.data.dir = os.environ.get("FEWSHOT_NLU_DATA", "../shared/data")  # holds BANKING77/, CLINC150/, ...
  config.data.raw_dir = ""  # a dataset folder of your own (overrides data.dir)
  config.data.tfds_dir = ""  # prepared array_record files; default $FEWSHOT_NLU_TFDS_DIR or ~/tensorflow_datasets
  config.data.train_split = "train_10"
  config.data.eval_split = "test"

  config.eval = ml_collections.ConfigDict()
  config.eval.batch_size = 32

  config.distributed = ml_collections.ConfigDict()
  config.distributed.enabled = False
  config.distributed.coordinator_address = ""
  config.distributed.num_processes = 0
  config.distributed.process_id = -1
  return config


def add_training(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
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

  config.mesh = ml_collections.ConfigDict({"data": -1, "fsdp": 1, "model": 1})
  config.sharding = ml_collections.ConfigDict()
  config.sharding.rules = ((".*", "logical"),)
  return config


def mlp_classifier(**values) -> ml_collections.ConfigDict:
  """The MLP head's fields (``heads.mlp.MLPConfig``, one shape for every method that trains one); ``values``
  override the defaults (Casanueva et al. 2020's MLP: two hidden layers of 768, dropout 0.75, SGD 0.5)."""
  mlp = ml_collections.ConfigDict()
  mlp.hidden = (768, 768)
  mlp.dropout = 0.75
  mlp.dropout_site = "hidden_inputs"  # before every hidden layer (Casanueva et al.'s code) | "hidden_outputs"
  mlp.optimizer = "sgd"  # "sgd" | "adamw"
  mlp.learning_rate = 0.5
  mlp.weight_decay = 0.0  # adamw only
  mlp.warmup_fraction = 0.0
  mlp.decay = "linear"  # after warm-up: "linear" | "cosine" | "constant"
  mlp.label_smoothing = 0.0
  mlp.class_balanced = False  # single-label: weight rows so every intent counts the same (heads.mlp.class_weights)
  mlp.epochs = 500
  mlp.batch_size = 32
  for key, value in values.items():
    if key not in mlp:
      raise KeyError(f"mlp_classifier: unknown field {key!r}")
    mlp[key] = value
  return mlp
