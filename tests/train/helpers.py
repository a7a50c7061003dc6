"""``_loop``: ``loop.train`` of a tiny BERT on a few toy batches with a given loss / gradients (shared by
train/test_loop, test_checkpoint and test_metrics)."""

import jax

from configs import intent_mneg as baseline_config
from fewshot_nlu import sharding
from fewshot_nlu.data.stream import EpochStream
from fewshot_nlu.encoders import transformer
from fewshot_nlu.methods import baseline as intent_mneg
from fewshot_nlu.train import loop
from fewshot_nlu.train.checkpoint import Checkpointer
from fewshot_nlu.train.metrics import MetricWriter
from fewshot_nlu.train.setup import build_training
from tests import tiny


def _loop(workdir, model, loss_fn=None, grads_fn=None, *, total_steps=4, save_every=3, log_every=3):
  """``loop.train`` of a tiny BERT on a few toy batches with the given loss / gradients."""
  config = baseline_config.get_config()
  mesh = sharding.make_mesh({"data": 2}, jax.devices()[:2])
  split = intent_mneg.IntentSplit(tiny.CORPUS[:10], [f"l{i % 4}" for i in range(10)], None)
  make_batch = intent_mneg.make_batcher(split, {f"l{i}": i for i in range(4)}, model.tokenizer, 32, seed=0)
  stream = EpochStream(10, 4, make_batch, seed=0)
  training = build_training(model.params, transformer.logical_axes(model.config), loss_fn, total_steps, mesh,
                            config, grads_fn)
  checkpointer = Checkpointer(workdir, save_every, keep=10)
  writer = MetricWriter(workdir, tensorboard=False)
  try:
    return loop.train(training=training, stream=stream, total_steps=total_steps, mesh=mesh,
                      checkpointer=checkpointer, writer=writer, log_every=log_every, divergence_hint="try less")
  finally:
    checkpointer.close()
    writer.close()
