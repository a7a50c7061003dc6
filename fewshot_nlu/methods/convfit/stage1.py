"""ConvFiT Stage 1 (§2.1): adaptive conversational fine-tuning by response ranking.

A dual encoder (shared weights, mean pooling) ranks each context's response against the other responses of
the GLOBAL batch with MNEG (Eq. 1, ``losses.ranking.mneg_loss``; S(c, r) = D cos(c, r), D = ``loss.scale``).
Under jit over a mesh the batch is one global array, so the [B, B] score matrix spans every device's
responses. ``loss.cache_chunks`` > 0 switches to gradient caching (``cached_mneg_loss_and_grads``): the same
loss and gradients with the activation memory of one chunk, for global batches of tens of thousands on pods.

Data: ``dialogue_pairs`` (config ``context_response``: up to 3 context turns joined by the tokenizer's
separator token -> the next turn; SGD + Taskmaster-4 from ../shared/data) here, or
``reddit_conversational`` (PolyAI's Reddit JSON lines, the paper's source; ``context`` only, as in the paper).
Evaluation: response selection on the held-out split, R@1 among 100 candidates (the true response and 99
others of the same group). The exported encoder (``export/``) is the input LM of Stage 2
(``--config.model.name=<workdir>/export``).

Pods (``configs/convfit_stage1_reddit.py``): every process streams the same global batches and places its own
devices' rows (``sharding.global_batch``), so a pod run sees the single-process batch sequence; ``--workdir``
may be ``gs://`` (checkpoints, metrics, TensorBoard, export and results are all written there).

Deviation (scale): the paper trains 2 epochs at batch 256 on ~2% of Reddit; on CPU the config's
``train.max_steps`` caps the run (see bench/results/convfit.md for what was run).
"""

from __future__ import annotations

import json
import logging
import pathlib

import jax
import ml_collections

from fewshot_nlu import config_checks, workdirs
from fewshot_nlu.data import batching, builders, splits
from fewshot_nlu.data.builders import base
from fewshot_nlu.data.stream import EpochStream
from fewshot_nlu.encoders import packing, pooling, pretrained, st_modules, transformer
from fewshot_nlu.encoders.sentence import SentenceEncoder
from fewshot_nlu.encoders.transformer import DTYPES
from fewshot_nlu.evaluation.response_selection import response_selection
from fewshot_nlu.evaluation.suite import fixed_subset
from fewshot_nlu.losses.ranking import cached_mneg_loss_and_grads, mneg_loss
from fewshot_nlu.methods.convfit.stage2 import STAGE1_MARKER
from fewshot_nlu.train import run as train_run
from fewshot_nlu.train.metrics import MetricWriter

log = logging.getLogger(__name__)

SOURCES = ("dialogue_pairs", "reddit_conversational")
REMOTE_WORKDIR = True  # every file of the run goes through orbax / epath / tensorboardX (see main.run)


def validate(config: ml_collections.ConfigDict) -> None:
  config_checks.require_choice(config, "data.builder", SOURCES)
  train_run.validate_training(config)  # train.max_steps >= 0 among them
  config_checks.require_positive(config, "loss.scale")
  config_checks.require_non_negative(config, "loss.cache_chunks", "eval.max_pairs")
  train_run.validate_packing(config)
  if config.loss.cache_chunks and config.train.packing:
    raise config_checks.ConfigError("config.train.packing: gradient caching (config.loss.cache_chunks) cuts the "
                                    "batch into chunks of rows, which packed rows do not align with")
  if config.loss.cache_chunks and config.train.batch_size % config.loss.cache_chunks:
    raise config_checks.ConfigError(f"config.loss.cache_chunks: {config.loss.cache_chunks} does not divide "
                                    f"config.train.batch_size={config.train.batch_size}")
  _builder(config)


def _builder(config):
  kwargs = {"data_dir": config.data.tfds_dir or None}
  if config.data.builder_config:
    kwargs["config"] = config.data.builder_config
  if config.data.raw_dir:
    kwargs["raw_dir"] = config_checks.require_dir(config, "data.raw_dir")
  elif config.data.builder == "dialogue_pairs":
    kwargs["raw_dir"] = config_checks.require_dir(config, "data.dir")
  builder = base.prepare(builders.get_builder(config.data.builder, **kwargs))
  for field in ("data.train_split", "data.eval_split"):
    split = config_checks.get(config, field)
    splits.require_splits(config, builder, field, [split] if split else [])
  return builder


def make_loss(cfg: transformer.EncoderConfig, config):
  """(loss_fn, grads_fn): plain MNEG over the global batch, or its gradient-cached form."""
  dtype = DTYPES[config.model.dtype]
  module = transformer.TransformerEncoder(cfg, dtype)
  pool = pooling.get_pooler(config.model.pooling)

  def embed(params, chunk, rng):  # the gradient-cached path's chunks (padded, never packed)
    hidden = module.apply({"params": params}, chunk["ids"], chunk["mask"], deterministic=False,
                          rngs={"dropout": rng})
    return pool(hidden, chunk["mask"])

  def sides(batch):
    return ({"ids": batch["context_ids"], "mask": batch["context_mask"]},
            {"ids": batch["response_ids"], "mask": batch["response_mask"]})

  def loss_fn(params, batch, rng):
    context_rng, response_rng = jax.random.split(rng)
    def side(name, side_rng):  # padded or packed (``train.packing``)
      return packing.encode_side(cfg, params, batch, name, num_items=batch["valid"].shape[0],
                                 pool=config.model.pooling, dtype=dtype, deterministic=False, rng=side_rng)
    loss = mneg_loss(side("context", context_rng), side("response", response_rng), batch["valid"],
                     scale=config.loss.scale, exclude_positive=config.loss.exclude_positive)
    return loss, {}

  def grads_fn(params, batch, rng):
    contexts, responses = sides(batch)
    loss, grads = cached_mneg_loss_and_grads(
        embed, params, contexts, responses, rng, num_chunks=config.loss.cache_chunks, valid=batch["valid"],
        scale=config.loss.scale, exclude_positive=config.loss.exclude_positive)
    return loss, {}, grads

  return loss_fn, (grads_fn if config.loss.cache_chunks else None)


def run(config: ml_collections.ConfigDict, workdir: pathlib.Path | workdirs.epath.Path) -> dict:
  builder = _builder(config)
  model = pretrained.load_pretrained(config.model.name)
  tok = model.tokenizer
  separator = tok.separator
  contexts, responses = base.read_text_pairs(builder, config.data.train_split, separator)
  log.info("stage 1: %d (context, response) pairs from %s/%s", len(contexts), config.data.builder,
           config.data.train_split)
  mesh, batch_size = train_run.mesh_and_batch(config)
  buckets = batching.length_buckets(config.model.max_length)
  stream = EpochStream(len(contexts), batch_size,
                       batching.pair_batcher(tok.encode(contexts, config.model.max_length),
                                             tok.encode(responses, config.model.max_length), buckets, tok.pad_id,
                                             *train_run.packing_layout(config, mesh)),
                       seed=config.seed)
  writer = MetricWriter(workdir)
  loss_fn, grads_fn = make_loss(model.config, config)
  params, steps = train_run.train(config, workdir, model.params, transformer.logical_axes(model.config), loss_fn,
                                  stream, mesh, writer, grads_fn=grads_fn)
  epoch_steps = stream.total_steps(config.train.epochs)
  results = {"pairs": len(contexts), "steps": steps,
             "epochs_run": round(steps / max(epoch_steps, 1) * config.train.epochs, 3)}
  if config.data.eval_split:
    held_c, held_r = base.read_text_pairs(builder, config.data.eval_split, separator)
    keep = fixed_subset(len(held_c), config.eval.max_pairs)
    held_c, held_r = [held_c[i] for i in keep], [held_r[i] for i in keep]

    def evaluate(p):
      enc = SentenceEncoder.from_config(config, model.config, p, tok)
      return response_selection(lambda texts: enc.encode(texts, show_progress=True), held_c, held_r, ks=(1,))

    results.update(evaluate(params))
    if config.eval.before_training:
      results["before_training"] = evaluate(model.params)
  if jax.process_index() == 0:
    with workdirs.atomic_folder(workdir / "export") as export:
      pretrained.save_pretrained(export, model.config, params, tok, model.heads)
      st_modules.write(export, hidden_size=model.config.hidden_size, pooling=config.model.pooling, normalize=True,
                       max_length=config.model.max_length)  # as ``evaluate`` encodes
      (export / STAGE1_MARKER).write_text(json.dumps(
          {"base_model": config.model.name, "data": f"{config.data.builder}/{config.data.train_split}",
           "steps": steps, "batch_size": config.train.batch_size}, indent=1) + "\n")
  results.update(method=config.method, dataset=config.data.builder, model=config.model.name)
  writer.write(steps, {k: v for k, v in results.items() if k.startswith("r1") or k == "mrr"}, prefix="eval/")
  writer.close()
  return workdirs.write_results(workdir, results)
