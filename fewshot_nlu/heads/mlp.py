"""MLP intent classifier on cached, frozen sentence encodings (Casanueva et al. 2020; ConvFiT footnote 10).

ConvFiT's feature-based baseline (LM+S1): "a 2-layer fully-connected MLP (768-dim hidden layers), trained via
SGD with the high learning rate (0.5) and linear decay, and very aggressive dropout rates (0.75); training
lasts for 500 epochs; batch size is 32". Not stated there, and taken from Casanueva et al.'s released classifier
(PolyAI ``intent_detection/classifier.py``: a Keras ``Dropout`` before every hidden ``Dense``, none before the
softmax): ReLU activations and dropout on the *inputs of every hidden layer* (``dropout_site =
"hidden_inputs"``, the sentence encoding itself included); no weight decay, a softmax cross-entropy output
(``multilabel=False``). ``dropout_site = "hidden_outputs"`` (dropout after every hidden activation, none on the
encoding) is what this module did until 2026-12-06. The released placement, on the untouched MPNet-base over NLU++'s
10 low-data folds (Multi-ConvFiT's MLP): banking 68.28 -> 70.77, hotels 60.51 -> 63.54 micro-F1, beside the paper's
same-encoder row 70.5 / 64.7 (bench/results/multi_convfit_notes.md); ConvFiT's MLP baseline on BANKING77 10-shot
(MiniLM) 75.00 -> 85.55 (bench/results/convfit_notes.md).

Multi-ConvFiT's classifier (§2.2, §3) is ``multilabel=True``: sigmoid outputs, binary cross-entropy, and the
multi-label-corrected label smoothing of its Eq. (1) (see ``loss``); one hidden layer of 512, dropout 0.4,
AdamW 3e-3 with 10% warm-up and weight decay 0.02 (``optimizer="adamw"``), 600 epochs, batch 32.

Training is one jitted program (epochs x steps as ``lax`` loops over arrays already on device), so 500
epochs on a few thousand encodings take seconds.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import optax

from fewshot_nlu import config_checks, workdirs
from fewshot_nlu.data import batching
from fewshot_nlu.encoders import projection
from fewshot_nlu.train import optimizer

FILE = "mlp.safetensors"
OPTIMIZERS = ("sgd", "adamw")
DROPOUT_SITES = ("hidden_inputs", "hidden_outputs")  # Casanueva et al.'s released placement; the pre-2026-12-06 one
DEFAULT_DROPOUT_SITE = DROPOUT_SITES[0]  # defaults.common.mlp_classifier spells it out (config files import no jax)


@dataclasses.dataclass(frozen=True)
class MLPConfig:
  hidden: tuple[int, ...] = (768, 768)
  dropout: float = 0.75
  dropout_site: str = DEFAULT_DROPOUT_SITE  # DROPOUT_SITES: before every hidden layer, or after every hidden activation
  learning_rate: float = 0.5
  epochs: int = 500
  batch_size: int = 32
  multilabel: bool = False
  label_smoothing: float = 0.0  # epsilon; for multi-label, Multi-ConvFiT's ls = 1 - epsilon
  optimizer: str = "sgd"  # "sgd" | "adamw"
  weight_decay: float = 0.0  # adamw only; matrices only (``train.optimizer.weight_decay_mask``)
  warmup_fraction: float = 0.0
  decay: str = "linear"  # after warm-up, to 0 at the last step: "linear" | "cosine" | "constant"
  class_balanced: bool = False  # softmax only: every class weighs the same in the loss (``class_weights``)
  seed: int = 0

  def __post_init__(self):
    if self.optimizer not in OPTIMIZERS:
      raise ValueError(f"optimizer={self.optimizer!r} unknown; choose one of {OPTIMIZERS}")
    if self.dropout_site not in DROPOUT_SITES:
      raise ValueError(f"dropout_site={self.dropout_site!r} unknown; choose one of {DROPOUT_SITES}")
    if self.class_balanced and self.multilabel:
      raise ValueError("class_balanced is for single-label (softmax) heads")
    if not 0.0 <= self.label_smoothing < 1.0:
      raise ValueError(f"label_smoothing={self.label_smoothing} must be in [0, 1)")


def validate_config(config, field: str) -> None:
  """Checks the MLP section ``config.<field>`` (the fields of ``MLPConfig`` but ``multilabel`` and ``seed``),
  naming the field at fault."""
  config_checks.require_choice(config, f"{field}.optimizer", OPTIMIZERS)
  config_checks.require_choice(config, f"{field}.dropout_site", DROPOUT_SITES)
  config_checks.require_choice(config, f"{field}.decay", optimizer.DECAYS)
  config_checks.require_positive(config, f"{field}.epochs", f"{field}.batch_size", f"{field}.learning_rate")
  config_checks.require_non_negative(config, f"{field}.weight_decay")
  for name in ("dropout", "label_smoothing", "warmup_fraction"):
    config_checks.require_fraction(config, f"{field}.{name}")


def config_from(section, *, multilabel: bool, seed: int) -> MLPConfig:
  """The ``MLPConfig`` of a config's MLP section (``classifier.mlp`` in every method that trains one)."""
  return MLPConfig(hidden=tuple(section.hidden), dropout=section.dropout, dropout_site=section.dropout_site,
                   learning_rate=section.learning_rate,
                   epochs=section.epochs, batch_size=section.batch_size, multilabel=multilabel,
                   label_smoothing=section.label_smoothing, optimizer=section.optimizer,
                   weight_decay=section.weight_decay, warmup_fraction=section.warmup_fraction, decay=section.decay,
                   class_balanced=section.get("class_balanced", False), seed=seed)


def init(rng: jax.Array, sizes: tuple[int, ...]) -> list[dict]:
  """Dense layers ``sizes[0] -> ... -> sizes[-1]``, torch ``nn.Linear`` initialisation (U(+-1/sqrt(in)))."""
  return [projection.init(key, n_in, n_out)
          for key, (n_in, n_out) in zip(jax.random.split(rng, len(sizes) - 1), zip(sizes[:-1], sizes[1:]))]


def logits(layers: list[dict], x: jax.Array, dropout: float = 0.0, rng: jax.Array | None = None,
           dropout_site: str = DEFAULT_DROPOUT_SITE) -> jax.Array:
  """The head's output scores; with ``rng`` (training) inverted dropout at ``dropout_site`` (``DROPOUT_SITES``):
  on the input of every hidden layer, or on the output of every hidden activation. A head without hidden
  layers (logistic regression) drops nothing either way."""
  def drop(x, i):
    if rng is None or dropout <= 0:
      return x
    keep = jax.random.bernoulli(jax.random.fold_in(rng, i), 1.0 - dropout, x.shape)
    return jnp.where(keep, x / (1.0 - dropout), 0.0)

  for i, layer in enumerate(layers):
    hidden = i < len(layers) - 1
    if hidden and dropout_site == "hidden_inputs":
      x = drop(x, i)
    x = x @ layer["kernel"] + layer["bias"]
    if hidden:
      x = jax.nn.relu(x)
      if dropout_site == "hidden_outputs":
        x = drop(x, i)
  return x


def loss(out: jax.Array, targets: jax.Array, weights: jax.Array, *, multilabel: bool,
         label_smoothing: float) -> jax.Array:
  """Mean over weighted rows. Softmax: cross-entropy against one-hot targets smoothed as (1 - eps) t + eps / C.
  Multi-label: binary cross-entropy summed over the C labels, against Multi-ConvFiT Eq. (1)'s targets with
  ls = 1 - eps: y' = ls where y = 1, and (1 - ls) M_i / |C| elsewhere (M_i = the row's number of labels)."""
  if multilabel:
    ls = 1.0 - label_smoothing
    count = jnp.sum(targets, axis=-1, keepdims=True)
    smoothed = jnp.where(targets > 0, ls, (1.0 - ls) * count / targets.shape[-1])
    per_row = jnp.sum(optax.sigmoid_binary_cross_entropy(out, smoothed), axis=-1)
  else:
    smoothed = optax.smooth_labels(targets, label_smoothing) if label_smoothing else targets
    per_row = optax.softmax_cross_entropy(out, smoothed)
  return jnp.sum(per_row * weights) / jnp.maximum(jnp.sum(weights), 1.0)


def class_weights(targets: np.ndarray) -> np.ndarray:
  """Per-row weights N / (C' * n_c) for one-hot ``targets`` [N, C] (n_c: the rows of the row's class, C': the
  classes that have rows): each class's rows sum to N / C', so a class with 1 example weighs as much in the loss
  as one with 10 (the softmax's bias no longer learns the pool's class frequencies). 1.0 for every row of a
  balanced pool, where the weighted loss is the plain mean."""
  counts = targets.sum(axis=0)
  present = int((counts > 0).sum())
  return (targets.shape[0] / (present * counts[targets.argmax(axis=1)])).astype(np.float32)


def train(features: np.ndarray, targets: np.ndarray, config: MLPConfig = MLPConfig()) -> list[dict]:
  """Trains on ``features`` [N, H] and ``targets`` [N, C] (one-hot, or multi-hot when ``multilabel``).
  Every epoch is a fresh permutation cut into ``batch_size`` batches (the last one shorter: its padding rows
  carry zero weight; with ``class_balanced`` each row carries ``class_weights``); SGD or AdamW with
  ``train.optimizer.make_schedule`` over all steps."""
  n, dim = features.shape
  steps = math.ceil(n / config.batch_size)
  total = steps * config.epochs
  rng = jax.random.key(config.seed)
  params = init(jax.random.fold_in(rng, 0), (dim, *config.hidden, targets.shape[1]))
  schedule = optimizer.make_schedule(config.learning_rate, total, config.warmup_fraction, config.decay)
  if config.optimizer == "adamw":
    tx = optax.adamw(schedule, weight_decay=config.weight_decay, mask=optimizer.weight_decay_mask)
  else:
    tx = optax.sgd(schedule)
  x, y = jnp.asarray(features, jnp.float32), jnp.asarray(targets, jnp.float32)
  row_weights = jnp.asarray(class_weights(np.asarray(targets)) if config.class_balanced else np.ones(n, np.float32))

  def step(carry, batch):
    params, opt_state = carry
    index, weight, key = batch
    grads = jax.grad(lambda p: loss(logits(p, x[index], config.dropout, key, config.dropout_site), y[index],
                                    weight, multilabel=config.multilabel,
                                    label_smoothing=config.label_smoothing))(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return (optax.apply_updates(params, updates), opt_state), None

  def epoch(e, carry):
    key = jax.random.fold_in(jax.random.fold_in(rng, 1), e)
    order = jnp.concatenate([jax.random.permutation(key, n), jnp.zeros(steps * config.batch_size - n, int)])
    weight = jnp.where(jnp.arange(steps * config.batch_size) < n, row_weights[order], 0.0)
    keys = jax.random.split(jax.random.fold_in(key, 1), steps)
    batches = (order.reshape(steps, -1), weight.reshape(steps, -1), keys)
    return jax.lax.scan(step, carry, batches)[0]

  run = jax.jit(lambda carry: jax.lax.fori_loop(0, config.epochs, epoch, carry))
  params, _ = run((params, tx.init(params)))
  return jax.device_get(params)


HOST_ROWS = 2  # up to this many rows are scored on the host: a jitted call's dispatch costs more than the product
# (one utterance, as a chatbot sends it; a server's gathered batches stay in one jitted program)


def predict_proba(layers: list[dict], features: np.ndarray, multilabel: bool = False) -> np.ndarray:
  """[N, C] softmax (sigmoid when ``multilabel``) of ``logits``; a few rows (a chatbot's utterance) in numpy
  (0.17 -> ~0.01 ms for one row on a linear head), more in one jitted program."""
  if len(features) <= HOST_ROWS:
    x = np.asarray(features, np.float32)
    for i, layer in enumerate(layers):
      x = x @ np.asarray(layer["kernel"], np.float32) + np.asarray(layer["bias"], np.float32)
      if i < len(layers) - 1:
        x = np.maximum(x, 0.0)
    if multilabel:
      return (1.0 / (1.0 + np.exp(-x))).astype(np.float32)
    x = np.exp(x - x.max(axis=-1, keepdims=True))
    return (x / x.sum(axis=-1, keepdims=True)).astype(np.float32)
  # rows padded to a power of two (``batching.row_bucket``), as the encoder and the index pad theirs: a server's
  # gathered batches of 3, 5, 6, ... texts reuse the programs its warm-up compiled instead of compiling each
  n = len(features)
  padded = np.zeros((batching.row_bucket(n, 1 << 30), np.shape(features)[1]), np.float32)
  padded[:n] = features
  return np.asarray(_proba_jit(layers, jnp.asarray(padded), multilabel=multilabel))[:n]


@functools.partial(jax.jit, static_argnames=("multilabel",))
def _proba_jit(layers, features, multilabel):
  out = logits(layers, features)  # one program: a single utterance pays one dispatch, not one per op
  return jax.nn.sigmoid(out) if multilabel else jax.nn.softmax(out, axis=-1)


def save(directory: str | pathlib.Path, layers: list[dict]) -> None:
  workdirs.save_safetensors({f"layer_{i}.{k}": np.ascontiguousarray(np.asarray(v, np.float32))
                             for i, layer in enumerate(layers) for k, v in layer.items()},
                            pathlib.Path(directory) / FILE)


def load(directory: str | pathlib.Path) -> list[dict] | None:
  path = pathlib.Path(directory) / FILE
  if not path.exists():
    return None
  from safetensors.numpy import load_file
  tensors = load_file(str(path))
  count = len(tensors) // 2
  expected = {f"layer_{i}.{k}" for i in range(count) for k in ("kernel", "bias")}
  if set(tensors) != expected:
    raise ValueError(f"{path}: expected tensors {sorted(expected)}, got {sorted(tensors)}")
  return [{k: tensors[f"layer_{i}.{k}"] for k in ("kernel", "bias")} for i in range(count)]
