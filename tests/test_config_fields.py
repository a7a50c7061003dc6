"""Every shipped config carries only fields its method reads; a field a method would ignore is an error naming
it; the static reader follows aliases, dotted field strings and sections passed whole."""

from __future__ import annotations

import importlib
import pathlib
import sys
import textwrap

import ml_collections
import pytest

from fewshot_nlu import config_fields, main
from fewshot_nlu.config_checks import ConfigError
from fewshot_nlu.methods import METHODS

CONFIGS = pathlib.Path(__file__).resolve().parents[1] / "configs"
# every variant a config file's argument selects (configs/<file>.py:<argument>)
VARIANTS = {
    "convfit_banking77": ["10", "30", "full"], "convfit_clinc150": ["10", "30", "full"],
    "convfit_hwu64": ["10", "30", "full"], "convfit_stage1": [None], "convfit_stage1_reddit": [None],
    "default": [None], "intent_mneg": [None], "dse_eval": [None], "dse_pretrain": ["consecutive", "dropout", "multi_turn", "combined"],
    "multi_convfit_mixatis": ["low", "high", "low,adapter", "high,none"],
    "multi_convfit_nlupp_banking": ["low", "high,adapter", "low,none"],
    "multi_convfit_nlupp_hotels": ["low", "high,adapter", "low,none"],
    "qaid_banking77": ["5", "10", "full"], "qaid_clinc150": ["5", "10", "full"], "qaid_hwu64": ["5", "10", "full"],
    "qaid_pretrain": [None],
    "retriever_clinc": ["frz", "pretrain", "finetune_tgt", "finetune_tgt_src"],
    "retriever_snips": ["retriever", "tuned", "frz", "proto", "proto_frz", "paper", "paper_frz"],
    "nlu": ["convfit", "qaid"], "span_encoder": [None],
}
SHARED = {"common", "convfit_base", "multi_convfit_base", "qaid_base", "retriever_base", "__init__"}


def test_every_config_file_is_listed():
  assert {p.stem for p in CONFIGS.glob("*.py")} - SHARED == set(VARIANTS)


@pytest.mark.parametrize("name,arg", [(n, a) for n, args in VARIANTS.items() for a in args])
def test_config_has_no_field_its_method_ignores(name, arg):
  module = importlib.import_module(f"configs.{name}")
  config = module.get_config() if arg is None else module.get_config(arg)
  assert config.method in METHODS
  assert config_fields.ignored_fields(config, METHODS[config.method].module) == []


def test_an_ignored_field_is_an_error_naming_it(tmp_path, monkeypatch):
  from configs import retriever_snips
  from fewshot_nlu.methods import get_method

  def trained(config, workdir):  # the static reader reads the source, not this stand-in
    raise AssertionError("the ignored field was let through: the Retriever would train")

  monkeypatch.setattr(get_method("retriever"), "run", trained)  # a regression fails here, not after 30 min
  config = retriever_snips.get_config()
  config.unlock()
  config.loss = ml_collections.ConfigDict({"scale": 20.0})  # read by the baseline, never by the Retriever
  with pytest.raises(ConfigError, match=r"config\.loss\.scale: method 'retriever' does not read this field"):
    main.run(config, tmp_path / "run")
  assert not (tmp_path / "run").exists()  # refused before anything is written


@pytest.fixture
def fake_method(tmp_path, monkeypatch):
  package = tmp_path / "fake_methods_pkg"
  package.mkdir()
  (package / "__init__.py").write_text("")
  (package / "method.py").write_text(textwrap.dedent('''
      from fewshot_nlu import config_checks

      def validate(config):
        config_checks.require_positive(config, "train.batch_size")

      def run(config, workdir):
        q = config.qaid
        head = q.head
        section = dict(config.mesh)
        return helper(config), q.temperature, head.size, config.get("seed"), config["model"]["name"]

      def helper(settings):  # a config under another name: its chains count as suffixes of a path
        return settings.classifier.threshold
      '''))
  monkeypatch.syspath_prepend(str(tmp_path))
  yield "fake_methods_pkg.method"
  sys.modules.pop("fake_methods_pkg.method", None)
  sys.modules.pop("fake_methods_pkg", None)


def test_reader_follows_aliases_strings_sections_and_helpers(fake_method):
  config = ml_collections.ConfigDict({
      "method": "fake", "seed": 0, "compilation_cache_dir": "", "distributed": {"enabled": False,
      "coordinator_address": "", "num_processes": 0, "process_id": -1},
      "train": {"batch_size": 8, "epochs": 1}, "qaid": {"temperature": 0.1, "unused": 1, "head": {"size": 2}},
      "mesh": {"data": -1, "fsdp": 1}, "classifier": {"threshold": 0.3, "kind": "x"},
      "model": {"name": "m", "pooling": "mean"}})
  # model.pooling is read for every method by runner.resolve_pooling (process level, like the compilation cache)
  assert sorted(config_fields.ignored_fields(config, fake_method)) == [
      "classifier.kind", "qaid.unused", "train.epochs"]
