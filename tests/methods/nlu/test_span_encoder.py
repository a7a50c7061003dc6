"""The general span encoder (configs/span_encoder.py) end to end: trained on the corpora it is given, installed
where ``fit`` looks, and what a joint ``fit`` starts its slot filler from."""

import shutil

import fewshot_nlu as fn


def test_the_general_span_encoder_trains_installs_and_is_what_fit_starts_from(tiny_bert_dir, tmp_path, caplog):
  """configs/span_encoder.py end to end on a hand-made MixATIS-shaped corpus and the tiny model: it trains on
  the corpora it is given (never the excluded ones), exports with its record, installs where fit looks, and a
  joint fit then starts its slot filler from it (no "no general span encoder" line)."""
  from fewshot_nlu import main
  from fewshot_nlu.defaults import span_encoder
  from fewshot_nlu.methods.nlu import span_encoder as span_encoder_method
  train = tmp_path / "data" / "MixATIS_clean" / "train"
  train.mkdir(parents=True)
  rows = [("book a flight to boston", "O O O O B-city", "book"), ("fly from denver to miami tomorrow",
          "O O B-city O B-city B-date", "book"), ("what is the fare to dallas", "O O O O O B-city", "fare"),
          ("cheapest fare on monday", "O O O B-date", "fare")]
  for name, column in (("seq.in", 0), ("seq.out", 1), ("label", 2)):
    (train / name).write_text("".join(r[column] + "\n" for r in rows))
  config = span_encoder.get_config()
  config.data.dir, config.data.sources = str(tmp_path / "data"), ("mixatis",)
  config.model.name, config.model.max_length, config.compilation_cache_dir = str(tiny_bert_dir), 16, ""
  config.retriever.encoder_layers, config.retriever.labels_per_batch = 2, 2
  config.train.max_steps, config.mesh.data = 2, 1
  results = main.run(config, tmp_path / "run")
  assert results["corpora"] == {"mixatis": 4} and results["labels"] == 2 and results["steps"] == 2
  installed = span_encoder_method.installed(str(tiny_bert_dir))
  assert installed is not None and (installed / span_encoder_method.MARKER).is_file()
  examples = [{"text": "a flight to boston", "intent": None, "entities": [{"start": 12, "end": 18, "entity": "city"}]}]
  slots = {"support_steps": (0,), "folds": 2, "model": str(tiny_bert_dir)}  # the model it was built on
  model = fn.fit(examples, method="nlu", workdir=tmp_path / "nlu", slots=slots, compilation_cache_dir="")
  assert f"general span encoder ({installed})" == model.results["slots"]["encoder"]
  assert "no general span encoder" not in caplog.text
  # a slot filler on another model (slots.model) does not start from an encoder built on this one: it says so
  other = tmp_path / "other_model"
  shutil.copytree(tiny_bert_dir, other)
  model = fn.fit(examples, method="nlu", workdir=tmp_path / "nlu_other",
                 slots={**slots, "model": str(other), "encoder_layers": 1}, compilation_cache_dir="")
  assert model.results["slots"]["encoder"] == f"{other} (untouched, layers 0-0)"
  assert (f"no general span encoder built on {other} is installed ({span_encoder_method.install_root()}: it holds "
          f"one built on {tiny_bert_dir}): the slot filler starts from {other} cut at layer 1") in caplog.text
  # one installed encoder per base model: building on the other model installs beside the first, not over it
  config.model.name = str(other)
  main.run(config, tmp_path / "run_other")
  assert span_encoder_method.installed(str(tiny_bert_dir)) == installed
  assert span_encoder_method.installed(str(other)) not in (None, installed)
  assert sorted(span_encoder_method.installed_models()) == sorted([str(tiny_bert_dir), str(other)])


def test_an_encoder_installed_by_the_single_folder_layout_is_still_found(tmp_path, monkeypatch):
  """Earlier versions installed one encoder directly in the install root: it is found for its base model only."""
  from fewshot_nlu.methods.nlu import span_encoder as span_encoder_method
  monkeypatch.setenv("FEWSHOT_NLU_CACHE", str(tmp_path))
  root = span_encoder_method.install_root()
  root.mkdir(parents=True)
  (root / span_encoder_method.MARKER).write_text('{"base_model": "minilm-l6"}')
  assert span_encoder_method.installed("minilm-l6") == root
  assert span_encoder_method.installed("mpnet-base") is None
  assert span_encoder_method.installed_models() == ["minilm-l6"]
  assert span_encoder_method.install_dir("mpnet-base") == root / "mpnet-base"
  assert span_encoder_method.install_dir("/a/b c").name.startswith("a_b_c-")
