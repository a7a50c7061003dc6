"""DSE (Zhou et al., 2022): dialogue sentence embeddings by contrastive learning on consecutive utterances.

Training (§3): every pair (x_i, x_i') of a batch of M positive pairs is encoded by the shared encoder, mean
pooled, and mapped by the contrastive head (``methods.dse.head``: d x d, ReLU, d x 128; used only in the
loss); the loss is the hard-negative weighted contrastive loss over the GLOBAL batch, Eq. (1)-(3)
(``methods.dse.losses.hard_negative_loss``, tau = ``loss.temperature`` = 0.05): under jit over a mesh every
anchor sees the other 2M - 2 vectors of all devices. Adam with constant learning rates, 3e-4 for the head and
3e-6 for the encoder (Appendix A.2; ``train.group_learning_rates``).

Positive pairs (``dse.pairs``), from ``dialogue_pairs`` (SGD + Taskmaster-4, utterances of <= 3 words
dropped, Appendix A.1):
  * ``consecutive``: DSE, (u_i, u_{i+1}) of one dialogue;
  * ``dropout``: DSE-dropout, every unique utterance of those pairs paired with itself (SimCSE: the two views
    differ only by encoder dropout);
  * ``multi_turn``: §4.4's (u_i [SEP] u_{i+1}, u_{i+2});
  * ``combined``: consecutive + multi_turn (the paper's combined set also has 3-utterance queries, which
    ``dialogue_pairs`` does not build by default).

Evaluation: the similarity-based suite (``evaluation.suite``) on the mean-pooled encoder output, after
training (``eval.suite``); ``export/`` holds the trained encoder without the head, loadable by every method
and by ``configs/dse_eval.py``.

Deviation (scale): the paper trains 15 epochs at batch 1024 on 893k pairs (8 V100s); on a CPU the config's
``train.max_steps`` and batch size cap the run (see bench/results/dse.md for exactly what ran).
"""

from __future__ import annotations

import json
import logging
import pathlib
import time

import jax
import ml_collections

from fewshot_nlu import config_checks, workdirs
from fewshot_nlu.data import batching, splits
from fewshot_nlu.data.builders import base
from fewshot_nlu.data.stream import EpochStream
from fewshot_nlu.encoders import pooling, pretrained, transformer
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.encoders.transformer import DTYPES
from fewshot_nlu.evaluation import suite
from fewshot_nlu.methods.dse import head as contrastive_head
from fewshot_nlu.methods.dse.losses import hard_negative_loss
from fewshot_nlu.train import run as train_run
from fewshot_nlu.train.metrics import MetricWriter

log = logging.getLogger(__name__)

PAIRS = ("consecutive", "dropout", "multi_turn", "combined")
MARKER = "dse.json"


def validate(config: ml_collections.ConfigDict) -> None:
  config_checks.require_choice(config, "dse.pairs", PAIRS)
  train_run.validate_training(config)
  config_checks.require_positive(config, "loss.temperature", "dse.head_dim")
  for pairing in _pairings(config):
    splits.dialogue_pairs_builder(config, pairing, "data.train_split")
  if config.eval.suite:
    suite.validate(config)


def _pairings(config) -> tuple[str, ...]:
  return {"consecutive": ("consecutive",), "dropout": ("consecutive",), "multi_turn": ("multi_turn",),
          "combined": ("consecutive", "multi_turn")}[config.dse.pairs]


def read_training_pairs(config, separator: str) -> tuple[list[str], list[str]]:
  """The (anchor, positive) texts of ``dse.pairs`` from the ``data.train_split`` of ``dialogue_pairs``."""
  firsts, seconds = [], []
  for pairing in _pairings(config):
    builder = splits.dialogue_pairs_builder(config, pairing, "data.train_split")
    a, b = base.read_text_pairs(builder, config.data.train_split, separator)
    firsts += a
    seconds += b
  if config.dse.pairs == "dropout":  # unique utterances, in order of first appearance
    firsts = list(dict.fromkeys(u for pair in zip(firsts, seconds) for u in pair))
    seconds = firsts
  return firsts, seconds


def train_params(model: pretrained.Pretrained, config) -> tuple[dict, dict]:
  """(params, logical axes): the encoder and a fresh contrastive head."""
  head = contrastive_head.init(jax.random.key(config.seed), model.config.hidden_size, config.dse.head_dim)
  return ({"encoder": model.params, "head": jax.device_get(head)},
          {"encoder": transformer.logical_axes(model.config), "head": contrastive_head.logical_axes()})


def make_loss_fn(cfg: transformer.EncoderConfig, config):
  module = transformer.TransformerEncoder(cfg, DTYPES[config.model.dtype])
  pool = pooling.get_pooler(config.model.pooling)

  def embed(params, ids, mask, rng):
    hidden = module.apply({"params": params["encoder"]}, ids, mask, deterministic=False, rngs={"dropout": rng})
    return contrastive_head.apply(params["head"], pool(hidden, mask))

  def loss_fn(params, batch, rng):
    first_rng, second_rng = jax.random.split(rng)  # two dropout masks: DSE-dropout's two views
    first = embed(params, batch["context_ids"], batch["context_mask"], first_rng)
    second = embed(params, batch["response_ids"], batch["response_mask"], second_rng)
    return hard_negative_loss(first, second, batch["valid"], temperature=config.loss.temperature,
                              weighted=config.loss.hard_negative_weighting), {}

  return loss_fn


def make_encoder(model: pretrained.Pretrained, params, config) -> SentenceEncoder:
  return SentenceEncoder.from_config(config, model.config, params, model.tokenizer,
                                     max_length=model.config.max_length)


def run(config: ml_collections.ConfigDict, workdir: pathlib.Path) -> dict:
  model = pretrained.load_pretrained(config.model.name)
  tok = model.tokenizer
  firsts, seconds = read_training_pairs(config, tok.separator)
  log.info("DSE (%s): %d training pairs", config.dse.pairs, len(firsts))
  mesh, batch_size = train_run.mesh_and_batch(config)
  buckets = batching.length_buckets(config.model.max_length)
  first_ids = tok.encode(firsts, config.model.max_length)
  second_ids = first_ids if config.dse.pairs == "dropout" else tok.encode(seconds, config.model.max_length)
  stream = EpochStream(len(firsts), batch_size, batching.pair_batcher(first_ids, second_ids, buckets, tok.pad_id),
                       seed=config.seed)
  params, axes = train_params(model, config)
  writer = MetricWriter(workdir)
  start = time.perf_counter()
  params, steps = train_run.train(config, workdir, params, axes, make_loss_fn(model.config, config), stream, mesh,
                                  writer)
  results = {"pairs": len(firsts), "steps": steps, "batch_size": config.train.batch_size,
             "epochs_run": round(steps * config.train.batch_size / max(len(firsts), 1), 4),
             "train_seconds": round(time.perf_counter() - start, 1)}
  if jax.process_index() == 0:
    with workdirs.atomic_folder(workdir / "export") as export:
      make_encoder(model, params["encoder"], config).save(export, heads=model.heads)  # + sentence-transformers files
      (export / MARKER).write_text(json.dumps(
          {"base_model": config.model.name, "pairs": config.dse.pairs, "steps": steps,
           "batch_size": config.train.batch_size, "temperature": config.loss.temperature}, indent=1) + "\n")
  if config.eval.suite:
    start = time.perf_counter()
    results["suite"] = suite.run(make_encoder(model, params["encoder"], config), config)
    results["suite_seconds"] = round(time.perf_counter() - start, 1)
    writer.write(steps, suite.flat_metrics(results["suite"]), prefix="eval/")
    if jax.process_index() == 0:
      suite.write(results["suite"], workdir, f"Evaluation suite: DSE ({config.dse.pairs}) from {config.model.name}, "
                  f"{steps} steps x batch {config.train.batch_size}")
  writer.close()
  results.update(method=config.method, pairs_variant=config.dse.pairs, model=config.model.name)
  return workdirs.write_results(workdir, results)
