"""``train.run.train`` returns the steps trained when a callback stops it early."""

import jax

from configs import intent_mneg as baseline_config
from fewshot_nlu import sharding
from fewshot_nlu.data.stream import EpochStream
from fewshot_nlu.encoders import pretrained, transformer
from fewshot_nlu.methods import baseline as intent_mneg
from fewshot_nlu.train.metrics import MetricWriter
from tests import tiny


def test_train_returns_the_steps_trained_when_a_callback_stops_early(tiny_bert_dir, tmp_path):
  from fewshot_nlu.train import run as train_run
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  config = baseline_config.get_config()
  mesh = sharding.make_mesh({"data": 2}, jax.devices()[:2])
  split = intent_mneg.IntentSplit(tiny.CORPUS[:10], [f"l{i % 4}" for i in range(10)], None)
  stream = EpochStream(10, 4, intent_mneg.make_batcher(split, {f"l{i}": i for i in range(4)}, model.tokenizer, 32,
                                                       seed=0), seed=0)
  seen = []

  def stop_at_four(step, state):
    seen.append(step)
    return step == 4

  _, steps = train_run.train(config, tmp_path, model.params, transformer.logical_axes(model.config),
                             intent_mneg.make_loss_fn(model.config, config), stream, mesh,
                             MetricWriter(tmp_path, tensorboard=False), total_steps=6, callback=stop_at_four,
                             callback_every=2)
  assert seen == [2, 4] and steps == 4
