"""Retriever on SNIPS few-shot slot filling (Yu et al., 2021, §6.2; Hou et al.'s 7 folds, 5-shot episodes).

  python -m fewshot_nlu.main --config=configs/retriever_snips.py --workdir=runs/retriever_snips

Evaluation is the paper's in every variant: per fold, model selection (the best training step, the threshold)
on all 100 episodes of the development domain, then every one of the 100 test episodes of the test domain,
per-episode conlleval F1 averaged. Only training differs from App. A.1, as follows (default variant,
``retriever``; every change is a config switch, measured in bench/results/retriever.md):
  * Span vectors from the encoder's layer 3 (``retriever.encoder_layers = 3``: the model is cut there, so
    training, inference and the export run 3 of MiniLM's 6 layers). The untouched MiniLM's lower layers
    retrieve slot spans better than its top layer, which is tuned for mean-pooled sentence similarity.
  * The embeddings and layer 0 frozen, their states computed once per utterance
    (``train.frozen_prefix_layers = 1``), so a step trains layers 1-2 only.
  * ``retriever.negative_spans = 4``: non-slot spans of each item's utterance as a "none" column of the batch
    softmax (``losses.batch_softmax``), against the paper's main error source (invalid spans retrieving a
    slot); ``retriever.cosine_scale = 20``: s = 20 cos(z, z') in training, the similarity retrieval uses.
  * lr 1e-4 (App. A.1: 2e-5) with 10% warm-up, ``train.max_steps = 150`` per fold (B = 5 spans of each of the
    ~30 source labels: ~1/20 of an epoch of per-label batches; the paper trains to early stopping), the
    development F1 every 25 steps and the best step kept.
  * The threshold grid spans 0.40-0.95 in steps of 0.025 (App. A.1: 0.85-0.97 in steps of 0.05, fitted to
    BERT-base's similarity scale; MiniLM's development optimum lies below that range).
Variants (``configs/retriever_snips.py:<variant>``):
  * ``retriever`` (default), ``frz`` (Retriever^frz: the untouched encoder, same layer and decoding),
    ``tuned`` (the default, then each episode's 5-shot support learnt before its queries are decoded: a span
    metric W = I + D, 0 / 25 / 50 / 100 steps, the count chosen on the development domain with the threshold;
    the fine-tuned-on-support setting; the paper's Retriever decodes with the support untouched),
    ``tuned_encoder`` (the same, but the encoder learns each episode's support: the joint NLU model's preferred
    learner, ``slots.modes``; its layer 2 only, lr 3e-4, chosen on fold 1's development domain over layers 1-2
    at the joint model's 1e-4: development F1 73.57 vs 73.25 at 100 steps, half the cost a step;
    bench/results/retriever_notes.md),
    ``support_threshold`` / ``support_threshold_frz`` (the default / the untouched encoder, each episode decoded at
    the threshold its own support set prefers: its utterances decoded leave-one-out from the others over the grid,
    ``methods.retriever.slots.support_threshold``; not in the paper, whose threshold is the development domain's,
    one per fold: a domain's best threshold moves with its slots, 0.475 on SearchCreativeWork but ~0.7 on
    BookRestaurant for MPNet-base: bench/results/retriever_notes.md; the development domain still picks the step),
    ``proto`` / ``proto_frz`` (Proto: mean reduction, Eq. 3, and prototype retrieval);
  * ``paper``: App. A.1's training as written (the whole encoder, dot-product batch softmax without non-slot
    spans, lr 2e-5, one epoch of per-label batches, development F1 every 100 steps, grid 0.85-0.95): hours on a
    CPU, meant for an accelerator; ``paper_frz``: the untouched encoder's top layer with that grid.
1-shot: --config.data.builder_config=shot_1 (and --config.retriever.per_label_batch=1, as App. A.1 ties B to K).
"""

import ml_collections

from fewshot_nlu.defaults import retriever_base

VARIANTS = ("retriever", "tuned", "tuned_encoder", "frz", "support_threshold", "support_threshold_frz", "proto",
            "proto_frz", "paper", "paper_frz")


def get_config(variant: str = "retriever") -> ml_collections.ConfigDict:
  if variant not in VARIANTS:
    raise ValueError(f"variant {variant!r} unknown; choose one of {VARIANTS} (configs/retriever_snips.py:<variant>)")
  config = retriever_base.get_config("retriever", per_label_batch=5, dev_every=25)  # B = 5 (5-shot)
  config.data.builder = "snips_fewshot_slots"
  config.data.builder_config = "shot_5"
  config.data.train_split = ""  # per fold: fold{k}_train / fold{k}_valid / fold{k}_test
  config.data.eval_split = ""
  config.data.folds = (1, 2, 3, 4, 5, 6, 7)
  config.model.max_length = 64
  config.train.learning_rate = 1e-4
  config.train.max_steps = 150
  config.train.save_every = 25
  config.train.frozen_prefix_layers = 1
  config.eval.batch_size = 32

  r = config.retriever
  r.encoder_layers = 3  # > 0: cut the encoder after this many layers (span vectors from that layer); 0: all
  r.similarity = "cosine"  # retrieval by the cosine of span vectors; "dot": by the raw dot product
  r.negative_spans = 4
  r.cosine_scale = 20.0
  r.max_words = 7  # m
  r.beam_size = 10
  r.merge_threshold = 0.99  # lambda
  r.thresholds = tuple(round(0.40 + 0.025 * i, 3) for i in range(23))  # 0.40 ... 0.95, chosen on development
  r.threshold_step = 0.05  # dynamic threshold: lowered by this ...
  r.threshold_retries = 10  # ... at most this many times
  r.support_steps = (0,)  # per episode, learn its support set for one of these step counts (chosen on
  # development with the threshold) before retrieving; (0,): retrieval alone, the paper's inference
  r.support_mode = "metric"  # what learns the support set: "metric" (a span metric W) | "encoder" (its layers)
  r.support_learning_rate = 1e-3
  r.support_frozen_layers = 1  # mode "encoder": embeddings + this many layers frozen while it learns (-1: none)
  r.episode_threshold = "development"  # an episode's threshold: the development domain's best (the paper: one per
  # fold) | "support": its own support set's, by leave-one-out decoding of its utterances (retrieval alone)
  r.dev_episodes = 0  # 0 = all 100 (fewer only for quick experiments; never for reported rows)
  r.test_episodes = 0  # 0 = all 100

  if variant.startswith("paper"):
    config.train.learning_rate = 2e-5  # App. A.1
    config.train.max_steps = 0  # one epoch (train.epochs = 1)
    config.train.save_every = 100
    config.train.frozen_prefix_layers = -1
    r.encoder_layers, r.negative_spans, r.cosine_scale = 0, 0, 0.0
    config.eval.dev_every = 100
    r.thresholds = (0.85, 0.90, 0.95)
  if variant.startswith("tuned"):
    r.support_steps = (0, 25, 50, 100)
  if variant == "tuned_encoder":
    r.support_mode = "encoder"  # the joint NLU model's preferred learner; its top layer only (layer 2 of the
    # cut), at 3x the joint model's rate: chosen on fold 1's development domain (the docstring)
    r.support_frozen_layers, r.support_learning_rate = 2, 3e-4
  if variant.startswith("support_threshold"):
    r.episode_threshold = "support"
  if "proto" in variant:
    r.reduction, r.inference = "mean", "prototype"
  if "frz" in variant:
    r.train = False
  return config
