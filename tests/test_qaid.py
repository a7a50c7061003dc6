"""QAID: BERT masking, the MLM head, N-pairs / ColBERT losses and BM25 against numpy, the cosine ablation as
one-token MaxSim, the fine-tuning loss sharded vs one device and against Eq. (3) on its views, the retrieval
model (exact, approximate candidates, Match-QQ+QA, new intents, save/load), and pre-training -> fine-tuning ->
predict end to end on a tiny model and toy intents. (MaxSim and SupCon themselves: test_late_interaction.py.)"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import qaid_banking77, qaid_pretrain
from fewshot_nlu import main, predict
from fewshot_nlu.config_checks import ConfigError
from fewshot_nlu.data import masking
from fewshot_nlu.encoders import pretrained, transformer
from fewshot_nlu.encoders import projection as projection_head
from fewshot_nlu.heads import mlm as mlm_head
from fewshot_nlu.methods.qaid import late_interaction
from fewshot_nlu.methods.qaid import train as qaid
from fewshot_nlu.methods.qaid.bm25 import BM25
from fewshot_nlu.methods.qaid.losses import npairs_loss, pairwise_softmax_loss, supcon_loss
from fewshot_nlu.methods.qaid.model import QAIDModel, intent_name, read_intent_descriptions
from tests import report_checks, tiny
from tests.test_dse import _toy_data

MASK, CLS, SEP, PAD, VOCAB = 4, 2, 3, 0, 50


# -------------------------------------------------------------------------------------------- masking

def _token_batch(rows=400, length=24, seed=0):
  rng = np.random.default_rng(seed)
  lengths = rng.integers(3, length + 1, rows)
  ids = np.full((rows, length), PAD, np.int32)
  for r, n in enumerate(lengths):
    ids[r, :n] = np.concatenate([[CLS], rng.integers(5, VOCAB, n - 2), [SEP]])
  return ids, (ids != PAD).astype(np.int32), lengths


def test_bert_mask_chooses_round_15_percent_of_real_tokens_and_splits_80_10_10():
  ids, mask, lengths = _token_batch()
  out = masking.bert_mask(jax.random.key(0), jnp.asarray(ids), jnp.asarray(mask), mask_id=MASK, vocab_size=VOCAB,
                          special_ids=(CLS, SEP, PAD))
  corrupted, positions, targets, weights = map(np.asarray, out)
  assert positions.shape == (len(ids), masking.max_predictions(ids.shape[1])) == (len(ids), 4)
  kinds = {"mask": 0, "random": 0, "same": 0}
  for r, n in enumerate(lengths):
    real = n - 2
    chosen = positions[r][weights[r] > 0]
    assert len(chosen) == max(1, round(0.15 * real)) and len(set(chosen)) == len(chosen)
    assert all(1 <= p <= n - 2 for p in chosen)  # never [CLS], [SEP] or padding
    np.testing.assert_array_equal(targets[r][weights[r] > 0], ids[r, chosen])
    untouched = np.setdiff1d(np.arange(ids.shape[1]), chosen)
    np.testing.assert_array_equal(corrupted[r, untouched], ids[r, untouched])
    for p in chosen:
      kinds["mask" if corrupted[r, p] == MASK else "same" if corrupted[r, p] == ids[r, p] else "random"] += 1
  total = sum(kinds.values())
  assert abs(kinds["mask"] / total - 0.8) < 0.06
  assert abs(kinds["random"] / total - 0.1 * (1 - 1 / VOCAB)) < 0.05  # a random token may equal the original
  assert abs(kinds["same"] / total - 0.1) < 0.05


# ------------------------------------------------------------------------------------------ MLM head

def _cfg(vocab=VOCAB, hidden=8, model_type="bert"):
  return transformer.EncoderConfig(vocab_size=vocab, hidden_size=hidden, num_layers=1, num_heads=2,
                                   intermediate_size=16, position_style="roberta" if model_type == "roberta"
                                   else "bert", model_type=model_type, pad_token_id=1 if model_type == "roberta"
                                   else 0, layer_norm_eps=1e-5)


def test_mlm_head_is_transform_plus_tied_decoder_and_its_loss_is_mean_ce_over_masked_tokens():
  cfg = _cfg()
  rng = np.random.default_rng(1)
  head = jax.tree.map(lambda x: np.asarray(x) + rng.normal(0, 0.1, np.shape(x)), mlm_head.init(jax.random.key(0), cfg))
  embeddings = rng.normal(0, 1, (VOCAB, 8))
  hidden = rng.normal(0, 1, (3, 6, 8))
  x = hidden @ head["dense"]["kernel"] + head["dense"]["bias"]
  x = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
  x = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
  x = x * head["norm"]["scale"] + head["norm"]["bias"]
  expected = x @ embeddings.T + head["output_bias"]
  np.testing.assert_allclose(mlm_head.logits(head, jnp.asarray(hidden), jnp.asarray(embeddings), cfg), expected,
                             rtol=1e-4, atol=1e-4)
  masked = masking.Masked(None, jnp.array([[1, 4], [0, 5], [2, 3]]), jnp.array([[7, 9], [11, 13], [5, 6]]),
                          jnp.array([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]]))
  log_probs = expected - np.log(np.exp(expected).sum(-1, keepdims=True))
  want = -np.mean([log_probs[0, 1, 7], log_probs[0, 4, 9], log_probs[1, 0, 11]])
  got = mlm_head.mlm_loss(head, jnp.asarray(hidden), masked, jnp.asarray(embeddings), cfg)
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("model_type", ["bert", "roberta"])
def test_mlm_head_round_trips_through_checkpoint_names(model_type):
  cfg = _cfg(model_type=model_type)
  head = jax.device_get(mlm_head.init(jax.random.key(3), cfg))
  tensors = mlm_head.to_checkpoint(head, cfg, np.ones((VOCAB, 8)))
  prefix = "lm_head." if model_type == "roberta" else "cls.predictions."
  assert all(k.startswith(prefix) for k in tensors) and f"{prefix}decoder.weight" in tensors
  loaded, found = mlm_head.from_checkpoint(tensors, cfg, jax.random.key(9))
  assert found
  jax.tree.map(np.testing.assert_array_equal, loaded, head)
  fresh, found = mlm_head.from_checkpoint({"pooler.dense.bias": np.zeros(8)}, cfg, jax.random.key(9))
  assert not found and float(np.std(fresh["dense"]["kernel"])) == pytest.approx(0.02, rel=0.3)


# ------------------------------------------------------------------------------------------- losses

def test_npairs_loss_matches_numpy_with_one_positive_and_same_intent_views_left_out():
  rng = np.random.default_rng(0)
  labels = np.array([0, 1, 0, -1, 0, 1, 0, -1])  # 4 queries (one padding) then their 4 intent names
  partner = np.array([4, 5, 6, 7, 0, 0, 0, 0])
  anchors = np.array([1, 1, 1, 1, 0, 0, 0, 0], bool)
  scores = rng.normal(0, 1, (8, 8))
  tau = 0.1
  losses = []
  for t in range(8):
    if not anchors[t] or labels[t] < 0:
      continue
    pool = [a for a in range(8) if a != t and labels[a] >= 0 and (a == partner[t] or labels[a] != labels[t])]
    losses.append(-(scores[t, partner[t]] / tau - np.log(np.sum(np.exp(scores[t, pool] / tau)))))
  got = npairs_loss(jnp.asarray(scores), jnp.asarray(labels), jnp.asarray(partner), jnp.asarray(anchors),
                    temperature=tau)
  np.testing.assert_allclose(got, np.mean(losses), rtol=1e-5, atol=1e-6)


def test_pairwise_softmax_loss_is_ce_over_the_positive_negative_pair():
  pos, neg = np.array([0.9, 0.2, 0.5]), np.array([0.1, 0.4, 0.5])
  want = np.mean([-np.log(np.exp(p) / (np.exp(p) + np.exp(n))) for p, n in zip(pos[:2], neg[:2])])
  got = pairwise_softmax_loss(jnp.asarray(pos), jnp.asarray(neg), jnp.array([1, 1, 0]))
  np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_bm25_by_hand_and_hard_negatives_skip_the_positive():
  docs = ["card arrival", "card not working", "top up failed", "lost or stolen card card"]
  bm25 = BM25(docs)
  n, avgdl, k1, b = 4, (2 + 3 + 3 + 5) / 4, 1.2, 0.75
  idf_card = math.log(1 + (n - 3 + 0.5) / (3 + 0.5))
  idf_once = math.log(1 + (n - 1 + 0.5) / (1 + 0.5))  # "not", "working": one document each
  term = lambda tf, dl: tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))  # noqa: E731
  want = [idf_card * term(1, 2), idf_card * term(1, 3) + 2 * idf_once * term(1, 3), 0.0, idf_card * term(2, 5)]
  np.testing.assert_allclose(bm25.scores("my card is not working"), want, rtol=1e-12)
  assert bm25.hard_negatives("my card is not working", positive=1, count=5) == [3, 0, 2, 3, 0]


# ------------------------------------------------------------------------------------ representations

def test_cosine_similarity_is_one_token_maxsim_of_the_projected_pooled_vector():
  rng = np.random.default_rng(0)
  hidden = jnp.asarray(rng.normal(0, 1, (3, 5, 8)), jnp.float32)
  mask = jnp.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
  projection = projection_head.init(jax.random.key(0), 8, 4)
  z, z_mask = late_interaction.represent(projection, hidden, mask, "cosine", "mean")
  assert z.shape == (3, 1, 4)
  pooled = np.asarray((hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True))
  v = pooled @ np.asarray(projection["kernel"]) + np.asarray(projection["bias"])
  v /= np.linalg.norm(v, axis=-1, keepdims=True)
  np.testing.assert_allclose(late_interaction.maxsim_scores(z, z_mask, z, z_mask), v @ v.T, rtol=1e-5, atol=1e-6)
  tokens, token_mask = late_interaction.represent(projection, hidden, mask, "late_interaction")
  full = late_interaction.maxsim_scores(tokens, token_mask, tokens, token_mask)
  np.testing.assert_allclose(late_interaction.maxsim_pairs(tokens, token_mask, tokens[::-1], token_mask[::-1]),
                             np.diag(np.asarray(full)[:, ::-1]), rtol=1e-6, atol=1e-6)


# -------------------------------------------------------------------------------------- training loss

def _loss_setup(tiny_bert_dir, **qaid_overrides):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  config = qaid_banking77.get_config()
  config.qaid.update(qaid_overrides)
  params, axes, notes = qaid.init_params(model, config, num_intents=3)
  assert notes.get("mlm_head", "initialised").startswith("initialised")  # the tiny checkpoint has no MLM head
  tok = model.tokenizer
  texts = tiny.CORPUS[:8]
  label_ids = np.array([0, 1, 2, 0, 1, 2, 0, 1], np.int32)
  stream = qaid.example_stream(texts, label_ids, ["bank money", "weather", "music please"], tok, config, 8)
  return model, config, params, axes, next(stream)


def test_finetune_loss_is_eq3_plus_aux_terms_and_sharded_equals_single_device(tiny_bert_dir):
  model, config, params, axes, batch = _loss_setup(tiny_bert_dir)
  loss_fn = qaid.make_loss_fn(model.config, model.tokenizer, config)
  tiny.assert_sharded_loss_equals_single_device(params, axes, loss_fn, lambda mesh: batch, atol=2e-5)
  rng = jax.random.key(5)
  loss, aux = loss_fn(params, batch, rng)
  assert float(loss) == pytest.approx(float(aux["contrastive"] + 0.1 * aux["classification"]
                                            + 0.05 * aux["mlm"]), rel=1e-6)
  # Without augmentation the views are deterministic: rebuild Eq. (3) from the encoder by hand.
  config.qaid.augment = False
  loss_fn = qaid.make_loss_fn(model.config, model.tokenizer, config)
  _, aux = loss_fn(params, batch, rng)
  module = transformer.TransformerEncoder(model.config)

  def views(ids, mask):
    z, m = late_interaction.represent(params["projection"], module.apply({"params": params["encoder"]}, ids, mask),
                                      mask)
    return np.asarray(z), np.asarray(m)

  zq, mq = views(batch["query_ids"], batch["query_mask"])
  za, ma = views(batch["answer_ids"], batch["answer_mask"])
  width = max(zq.shape[1], za.shape[1])
  pad = lambda a: np.pad(a, [(0, 0), (0, width - a.shape[1])] + [(0, 0)] * (a.ndim - 2))  # noqa: E731
  z = np.concatenate([pad(zq), pad(zq), pad(za), pad(za)])
  m = np.concatenate([pad(mq), pad(mq), pad(ma), pad(ma)])
  labels = np.tile(np.where(batch["valid"], batch["label"], -1), 4)
  scores = np.array([[np.sum(np.max(z[u][m[u] > 0] @ z[v][m[v] > 0].T, axis=1)) / m[u].sum() for v in range(32)]
                     for u in range(32)])
  want = 0.0
  for t in range(32):
    positives = [p for p in range(32) if p != t and labels[p] == labels[t]]
    log_denominator = np.log(np.sum(np.exp(np.delete(scores[t], t) / 0.07)))
    want += -np.mean([scores[t, p] / 0.07 - log_denominator for p in positives])
  np.testing.assert_allclose(aux["contrastive"], want / 32, rtol=2e-4, atol=1e-6)
  np.testing.assert_allclose(aux["contrastive"], supcon_loss(jnp.asarray(scores), jnp.asarray(labels)), rtol=2e-4,
                             atol=1e-6)


@pytest.mark.parametrize("overrides", [{"loss": "npairs"}, {"similarity": "cosine", "mlm_weight": 0.0}])
def test_ablation_losses_sharded_equal_single_device(tiny_bert_dir, overrides):
  model, config, params, axes, batch = _loss_setup(tiny_bert_dir, **overrides)
  loss_fn = qaid.make_loss_fn(model.config, model.tokenizer, config)
  loss, _ = tiny.assert_sharded_loss_equals_single_device(params, axes, loss_fn, lambda mesh: batch, atol=2e-5)
  assert np.isfinite(loss)


# ------------------------------------------------------------------------------------ retrieval model

def _qaid_model(tiny_bert_dir, **kwargs):
  model = pretrained.load_pretrained(str(tiny_bert_dir))
  projection = jax.device_get(projection_head.init(jax.random.key(0), model.config.hidden_size, 16))
  return QAIDModel(model.config, model.params, model.tokenizer, projection, batch_size=4, **kwargs)


def _assert_same_predictions(got, want):
  """Same labels and evidence; scores equal up to float32 rounding (batches of other shapes round differently)."""
  assert [(p.label, [(n.text, n.label) for n in p.neighbours]) for p in got] == [
      (p.label, [(n.text, n.label) for n in p.neighbours]) for p in want]
  np.testing.assert_allclose([n.score for p in got for n in p.neighbours],
                             [n.score for p in want for n in p.neighbours], rtol=1e-5, atol=1e-6)


def test_qaid_model_retrieves_names_exactly_and_approximately_and_grows(tiny_bert_dir, tmp_path):
  c = tiny.CORPUS
  exact = _qaid_model(tiny_bert_dir)
  exact.add_answers(["transfer_money", "weather", "book_table", "play_music"])
  assert [r["text"] for r in exact.rows] == ["transfer money", "weather", "book table", "play music"]
  scores, rows = exact.row_scores(c)
  z, m = exact.represent(c, 32)
  want = [[np.sum(np.max(z[i][m[i] > 0] @ exact.row_vectors[j][exact.row_mask[j] > 0].T, axis=1)) / m[i].sum()
           for j in rows] for i in range(len(c))]
  np.testing.assert_allclose(scores, want, rtol=1e-5, atol=1e-6)
  predictions = exact.predict(c, neighbours=2)
  assert [p.label for p in predictions] == [exact.rows[rows[j]]["label"] for j in np.argmax(scores, 1)]
  first, second = predictions[0].neighbours
  assert first.score >= second.score
  approximate = _qaid_model(tiny_bert_dir, candidate_threshold=0, candidate_tokens=1000)  # all candidates
  approximate.add_answers(["transfer_money", "weather", "book_table", "play_music"])
  _assert_same_predictions(approximate.predict(c), exact.predict(c))
  few = _qaid_model(tiny_bert_dir, candidate_threshold=0, candidate_tokens=1)
  few.add_answers(["transfer_money", "weather", "book_table", "play_music"])
  few_scores, _ = few.row_scores(c)
  finite = np.isfinite(few_scores)
  assert not finite.all() and finite.any()
  np.testing.assert_allclose(few_scores[finite], scores[finite], rtol=1e-5, atol=1e-6)
  # A new intent, from examples, without retraining; Match-QQ+QA scores the examples too.
  exact.add_examples([c[9]], ["thank_you"])
  assert exact.labels[-1] == "thank_you" and len(exact) == 6
  both = _qaid_model(tiny_bert_dir, match="qq+qa")
  both.add_answers(["transfer_money", "weather"])
  both.add_examples([c[5]], ["reset_pin"])
  top = both.predict([c[5]])[0]
  assert top.label == "reset_pin" and top.neighbours[0].text == c[5] and top.score == pytest.approx(1.0, abs=1e-5)
  exact.save(tmp_path / "m")
  loaded = QAIDModel.load(tmp_path / "m")
  assert loaded.rows == exact.rows
  _assert_same_predictions(loaded.predict(c), exact.predict(c))
  with pytest.raises(ValueError, match="already answered"):
    exact.add_answers(["weather"])


def test_intent_documents_score_each_query_token_against_all_of_an_intents_tokens(tiny_bert_dir, tmp_path):
  c = tiny.CORPUS
  model = _qaid_model(tiny_bert_dir, match="intent_doc", score_chunk=2)  # documents scored a few at a time
  model.add_answers(["transfer_money", "weather", "book_table"])
  model.add_examples([c[0], c[1], c[2], c[3], c[4]], ["transfer_money", "weather", "transfer_money", "weather",
                                                       "reset_pin"])
  z, m = model.represent(c, 32)
  tokens = {}  # the union of each intent's rows' token vectors, by hand
  for row, vectors, mask in zip(model.rows, model.row_vectors, model.row_mask):
    tokens.setdefault(row["label"], []).append(vectors[mask > 0])
  want = np.array([[np.sum(np.max(z[i][m[i] > 0] @ np.concatenate(tokens[l]).T, axis=1)) / m[i].sum()
                    for l in model.labels] for i in range(len(c))])
  np.testing.assert_allclose(model.scores(c), want, rtol=1e-5, atol=1e-6)
  assert model.labels == ["transfer_money", "weather", "book_table", "reset_pin"]  # reset_pin: name + example
  # One query encoding, every mode: the same as asking for each mode on its own.
  every = model.match_row_scores(c)
  for match in ("qa", "qq+qa", "intent_doc"):
    np.testing.assert_allclose(model.label_scores(*every[match]), model.scores(c, match=match), rtol=1e-6, atol=1e-6)
  assert every["qa"][1].tolist() == [0, 1, 2, 3]  # the answer rows (reset_pin's name comes before the examples)
  predictions = model.predict(c, neighbours=2)
  assert [p.label for p in predictions] == [model.labels[i] for i in want.argmax(1)]
  assert predictions[0].neighbours[0].text in {"transfer money", "weather", "book table", "reset pin"}
  model.add_examples([c[9]], ["weather"])  # the document grows with the examples
  grown = model.scores([c[9]])
  assert grown[0, 1] == pytest.approx(1.0, abs=1e-5)  # c[9]'s every token is in weather's document now
  model.save(tmp_path / "m")
  loaded = QAIDModel.load(tmp_path / "m")
  assert loaded.match == "intent_doc"
  np.testing.assert_allclose(loaded.scores(c), model.scores(c), rtol=1e-5, atol=1e-6)


def test_intent_names_and_description_files(tmp_path):
  assert intent_name("card_arrival") == "card arrival" and intent_name("alarm_query") == "alarm query"
  path = tmp_path / "names.tsv"
  path.write_text("card_arrival\twhen will my card arrive\n\nlost\n")
  with pytest.raises(ValueError, match="names.tsv, line 3: expected 'label<TAB>description'"):
    read_intent_descriptions(path)
  path.write_text("card_arrival\twhen will my card arrive\n")
  assert read_intent_descriptions(path) == {"card_arrival": "when will my card arrive"}


# --------------------------------------------------------------------------------------- end to end

def _overrides(config, data, model_dir):
  config.data.dir = str(data)
  config.data.tfds_dir = str(data / "tfds")
  config.model.name = str(model_dir)
  config.compilation_cache_dir = ""
  config.train.batch_size = 4
  config.train.max_steps = 3
  config.train.save_every = 2
  config.train.log_every = 1
  config.mesh.data = 2
  config.eval.batch_size = 4
  config.qaid.query_length = 16
  config.qaid.answer_length = 8
  return config


def test_pretrain_then_finetune_then_predict(tmp_path, tiny_bert_dir, capsys):
  data = _toy_data(tmp_path / "data")
  config = _overrides(qaid_pretrain.get_config(), data, tiny_bert_dir)
  config.qaid.pretrain_datasets = ("banking77", "clinc150")
  results = main.run(config, tmp_path / "pt")
  assert results["utterances"] == 12 and results["steps"] == 3  # the toy sets repeat the same 12 utterances
  assert results["init"]["mlm_head"].startswith("initialised")
  export = tmp_path / "pt" / "export"
  assert (export / late_interaction.PROJECTION_FILE).exists() and (export / qaid.MARKER).exists()
  pt = pretrained.load_pretrained(str(export))
  assert "cls.predictions.transform.dense.weight" in pt.heads  # the trained MLM head travels with the export

  config = _overrides(qaid_banking77.get_config("5"), data, export)
  results = main.run(config, tmp_path / "ft")
  assert results["init"] == {"projection": f"from {export}", "mlm_head": f"from {export}"}
  assert results["intents"] == 4 and results["steps"] == 3
  rows = (tmp_path / "ft" / "predictions.tsv").read_text().splitlines()
  assert len(rows) == 13 and all(r.split("\t")[4].count(" [") == 3 for r in rows[1:])
  model = QAIDModel.load(tmp_path / "ft" / "export")
  assert sorted(model.labels) == ["food", "money", "music", "weather"]
  test = [r.split("\t") for r in rows[1:]]
  assert [p.label for p in model.predict([t[0] for t in test])] == [t[2] for t in test]
  assert results["accuracy"] == pytest.approx(sum(t[1] == t[2] for t in test) / 12)  # the file's accuracy
  capsys.readouterr()
  assert predict.main(["--model", str(tmp_path / "ft" / "export"), "--neighbours", "4", tiny.CORPUS[0]]) == 0
  out = capsys.readouterr().out
  lines = out.splitlines()
  assert lines[0] == tiny.CORPUS[0] and lines[1].startswith("  -> ") and len(lines) == 6
  # Match-QQ+QA (the default): the evidence is the best rows, intent names and indexed training examples alike
  assert {line.split()[1] for line in lines[2:]} <= {"food", "money", "music", "weather"}


@pytest.mark.parametrize("overrides", [  # the losses of all three are tested against numpy above
    pytest.param({"loss": "npairs", "augment": False, "intent_descriptions": "DESCRIPTIONS"}, marks=pytest.mark.slow),
    {"loss": "triplet", "triplets_per_query": 2, "mlm_weight": 0.0, "class_weight": 0.0},
    pytest.param({"similarity": "cosine", "match": "qq+qa"}, marks=pytest.mark.slow),
])
def test_finetune_ablations_end_to_end(tmp_path, tiny_bert_dir, overrides):
  data = _toy_data(tmp_path / "data")
  config = _overrides(qaid_banking77.get_config("10"), data, tiny_bert_dir)
  if overrides.get("intent_descriptions"):
    (tmp_path / "d.tsv").write_text("money\ttransfers and payments\n")
    overrides = {**overrides, "intent_descriptions": str(tmp_path / "d.tsv")}
  config.qaid.update(overrides)
  results = main.run(config, tmp_path / "run")
  assert results["steps"] == 3
  rows = [r.split("\t") for r in (tmp_path / "run" / "predictions.tsv").read_text().splitlines()[1:]]
  assert len(rows) == 12 and results["accuracy"] == pytest.approx(sum(r[1] == r[2] for r in rows) / 12)
  report_checks.assert_report_matches_predictions(tmp_path / "run")
  model = QAIDModel.load(tmp_path / "run" / "export")
  assert model.similarity == config.qaid.similarity and model.match == config.qaid.match
  assert model.rejection.to_dict() == results["rejection"] and f"match={config.qaid.match}" in model.rejection.rule
  assert [p.label for p in model.predict([r[0] for r in rows])] == [r[2] for r in rows]  # the export agrees
  if "intent_descriptions" in overrides:
    assert {r["label"]: r["text"] for r in model.rows if r["kind"] == "answer"}["money"] == "transfers and payments"
  # every inference mode of the same model is scored; the configured one is the run's accuracy
  assert set(results["accuracy_by_match"]) == {"qa", "qq+qa", "intent_doc"}
  assert results["accuracy_by_match"][config.qaid.match] == pytest.approx(results["accuracy"], abs=1e-6)
  assert results["num_pool"] == 4 + 12  # names and examples are indexed whatever the mode
  if config.qaid.match == "qq+qa":
    # The test utterances are also the training examples, which are indexed as queries: each one short enough
    # to be indexed whole ([CLS] + words + [SEP] within answer_length) finds itself at cosine 1 and so its
    # own intent: 8 of the 12, where chance gets 3.
    whole = [r for r in rows if len(r[0].split()) + 2 <= config.qaid.answer_length]
    assert len(whole) == 8 and all(r[2] == r[1] and r[3] == "1.0000" for r in whole), whole
    assert results["accuracy"] >= 8 / 12


def test_config_errors_name_the_field(tmp_path, tiny_bert_dir):
  data = _toy_data(tmp_path / "data")
  missing = str(tmp_path / "missing.tsv")
  for field, value, message in [("loss", "nope", "config.qaid.loss"), ("similarity", "dot", "config.qaid.similarity"),
                                ("intent_descriptions", missing, "config.qaid.intent_descriptions"),
                                ("query_length", 999, "config.qaid.query_length: 999 exceeds")]:
    config = _overrides(qaid_banking77.get_config(), data, tiny_bert_dir)
    config.qaid[field] = value
    with pytest.raises(ConfigError, match=message):
      main.run(config, tmp_path / "w")
  config = _overrides(qaid_pretrain.get_config(), data, tiny_bert_dir)
  config.qaid.pretrain_splits = ("train", "test")
  with pytest.raises(ConfigError, match="config.qaid.pretrain_splits"):
    main.run(config, tmp_path / "w2")
  with pytest.raises(ValueError, match="shots"):
    qaid_banking77.get_config("3")
