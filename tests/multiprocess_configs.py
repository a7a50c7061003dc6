"""Tiny-model configs of every training method on toy data, for the multi-process tests (built from the same
helpers as each method's end-to-end test; every argument is a path, so a JSON spec can name them)."""

from __future__ import annotations

import pathlib

from configs import dse_pretrain, qaid_banking77
from tests import test_main
from tests.methods.convfit import test_stage1, test_stage2
from tests.methods.dse import test_train as test_dse
from tests.methods.multi_convfit import test_train as test_multi_convfit
from tests.methods.qaid import test_train as test_qaid


def intent_mneg(data: str, model: str):
  """The in-batch ranking baseline (configs/intent_mneg.py: MNEG + 1-NN) on a 3-intent toy folder."""
  config = test_main._toy_config(pathlib.Path(data), model)
  config.train.batch_size = 8
  config.train.epochs = 3
  return config


def intent_mneg_packed(data: str, model: str):
  """The baseline with ``train.packing``: several utterances per row, rows a multiple of 4 and the devices."""
  config = intent_mneg(data, model)
  config.train.packing = True
  return config


def convfit(data: str, model: str):
  """ConvFiT Stage 2 (OCL, per-label batches, length groups) + 1-NN on a 4-intent toy folder."""
  config = test_stage2._stage2_config(pathlib.Path(data), model)
  config.stage2.length_groups = 1
  # no second Stage 2 for the out-of-scope threshold: it builds its batches with the same code on half the pool
  # (tests/methods/convfit/test_stage2.py runs it), and would double this test's share of CI
  config.eval.calibration_rule = "leave_one_out"
  return config


def multi_convfit(data: str, model: str):
  """Multi-ConvFiT (full fine-tuning + the multi-label MLP) on the toy joint-NLU folder."""
  return test_multi_convfit._config(pathlib.Path(data), model, "fft")


def qaid(data: str, model: str):
  """QAID fine-tuning (SupCon + MLM, late interaction) on toy BANKING77."""
  config = test_qaid._overrides(qaid_banking77.get_config("10"), pathlib.Path(data), model)
  config.train.max_steps = 4
  return config


def dse(data: str, model: str):
  """DSE pre-training on toy SGD / Taskmaster dialogues (the evaluation suite off)."""
  config = test_dse._suite_overrides(dse_pretrain.get_config("consecutive"), pathlib.Path(data))
  config.model.name = model
  config.model.max_length = 32
  config.train.batch_size = 4
  config.train.max_steps = 3
  config.eval.suite = False
  return config


def convfit_stage1(data: str, model: str):
  """ConvFiT Stage 1 with the pod config (bf16, FSDP over every device) on toy Reddit pairs."""
  config = test_stage1.pod_config(model, pathlib.Path(data), pathlib.Path(data))
  config.mesh.fsdp = 4
  return config



def retriever(data: str, model: str):
  """Retriever slot filling (SNIPS protocol, fold 2 of a toy SNIPS: per-label batches, development selection)."""
  from tests.methods.retriever import helpers as retriever_helpers
  config = retriever_helpers._config()
  config.model.name, config.model.max_length = model, 32
  config.data.raw_dir = data
  config.data.folds = (2,)
  config.retriever.encoder_layers = 0  # the tiny model's 2 layers, embeddings + layer 0 frozen (cached)
  config.train.epochs, config.train.max_steps, config.eval.dev_every, config.train.save_every = 5, 3, 2, 2
  config.compilation_cache_dir = ""
  return config
