"""The Retriever's CLINC protocol (``methods.retriever.intents``): intent splits and shots, and pre-training then
fine-tuning end to end on a tiny model and toy intents."""

import json

from tests import report_checks


def test_intent_split_and_shots():
  from fewshot_nlu.methods.retriever.intents import sample_shots, split_intents
  categories = {f"c{k}": [f"c{k}_i{j}" for j in range(15)] for k in range(10)}
  source, target = split_intents(categories, 5, 15, seed=0)
  assert len(source) == 75 and len(target) == 75 and not set(source) & set(target)
  assert len({i.split("_")[0] for i in source}) == 5  # whole categories: (5, 15) = 5 new categories
  source, target = split_intents(categories, 10, 10, seed=1)
  assert len(source) == 100 and all(sum(i.startswith(f"c{k}_") for i in target) == 5 for k in range(10))
  assert split_intents(categories, 10, 10, seed=1) == (source, target)
  texts, labels = [f"t{i}" for i in range(30)], [f"c0_i{i % 3}" for i in range(30)]
  shot_texts, shot_labels = sample_shots(texts, labels, ["c0_i0", "c0_i2"], 4, seed=0)
  assert sorted(shot_labels) == ["c0_i0"] * 4 + ["c0_i2"] * 4
  assert all(labels[texts.index(t)] == l for t, l in zip(shot_texts, shot_labels))


def test_clinc_protocol_pretrain_then_finetune(tiny_bert_dir, tmp_path):
  from configs import retriever_clinc
  from fewshot_nlu import main as main_lib
  from tests.methods.dse.test_train import _toy_data
  data = _toy_data(tmp_path / "data")
  categories = tmp_path / "domains.json"
  categories.write_text(json.dumps({"a": ["money", "weather"], "b": ["food", "music"]}))

  def run(stage, model_name, workdir):
    config = retriever_clinc.get_config(f"{stage},2,1,2")
    config.model.name = model_name
    config.data.dir, config.data.tfds_dir = str(data), str(tmp_path / "tfds")
    config.retriever.categories_file = str(categories)
    config.train.max_steps, config.compilation_cache_dir, config.eval.batch_size = 2, "", 8
    return main_lib.run(config, tmp_path / workdir)

  frozen = run("frz", str(tiny_bert_dir), "frz")
  assert frozen["source_intents"] == 2 and frozen["target_intents"] == 2
  assert frozen["accuracy"]["tgt"]["support_rows"] == 4 and frozen["accuracy"]["balance"]["support_rows"] == 8
  assert frozen["accuracy"]["all"]["support_rows"] == 3 + 3 + 4  # every source example + the target shots
  pre = run("pretrain", str(tiny_bert_dir), "src")
  assert pre["training"]["labels"] == 2 and pre["training"]["items"] == 6
  tuned = run("finetune_tgt_src", str(tmp_path / "src" / "export"), "ft")
  assert tuned["training"]["labels"] == 4 and tuned["training"]["items"] == 8
  lines = (tmp_path / "ft" / "predictions.tsv").read_text().splitlines()
  assert len(lines) == 1 + 12 + 12 + 6  # all + balance score every test row; tgt the target rows
  for result in (frozen, pre, tuned):
    assert all(0 <= v["tgt"] <= 100 for v in result["accuracy"].values())
  for workdir, panels in (("frz", 1), ("ft", 2)):  # a report per support set; the embeddings once
    for n, name in enumerate(("all", "balance", "tgt")):
      report = report_checks.assert_report_matches_predictions(
          tmp_path / workdir, suffix="" if n == 0 else f"_{name}", support_set=name, embeddings=n == 0)
      assert f"support set {name!r}" in report
    assert report_checks.png_size(tmp_path / workdir / "embeddings.png")[0] > 500 * panels
