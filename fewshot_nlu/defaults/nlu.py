"""Joint NLU from a team's own annotated examples: intents + slots + out-of-scope in one model
(``fewshot_nlu.methods.nlu``; ``fewshot_nlu.fit(data, method="nlu")`` runs the same).

  python -m fewshot_nlu.main --config=configs/nlu.py --workdir=runs/my_bot --config.data.train=nlu.yml
  python -m fewshot_nlu.main --config=configs/nlu.py:qaid ...        # QAID for the intents

``data.train``: a Rasa ``nlu.yml`` (or a Rasa project's ``data/`` folder), a ``.jsonl`` / ``.csv`` with ``text``,
``intent`` and ``entities`` (character spans), a Dialogflow ES export (its ``.zip``, or the folder with its
``agent.json``), or a ``seq.in`` / ``seq.out`` / ``label`` folder (``data.annotated``); ``data.eval`` (optional,
the same forms): held-out examples the run scores (intent accuracy, slot F1, sentence accuracy); never used to
choose anything.

The parts:
  * ``intents``: the intent method's own config, as ``fit`` builds it for these examples (ConvFiT by default,
    its row of §3 by the examples per intent; QAID with ``:qaid``), trained on the examples that have an
    intent; its out-of-scope threshold is calibrated as that method does it (ConvFiT, since a team's data has no
    development split: on half of each intent's examples held out of a second Stage 2 on the other half,
    ``intents.eval.calibration_rule``);
  * ``slots``: a slot filler (``models.slot_filler``) over words that keep their character offsets, starting from
    ``slots.encoder``: ``general`` (the general span encoder ``configs/span_encoder.py`` installs, trained on
    public slot corpora; the untouched ``slots.model`` cut at ``slots.encoder_layers`` when none built on that
    model is installed, said in one line), or a folder. ``slots.model = "mpnet-base"`` with
    ``slots.encoder_layers = 6`` puts the slot filler on MPNet-base (a general span encoder built on it where one is
    installed, ``defaults/span_encoder.py`` has the command; else the untouched model):
    more accurate than the MiniLM one, at about twice its fit and parse time (bench/results/joint_nlu_notes.md). It then learns the user's examples (``methods.span_training``: the batch softmax
    over their slot spans against every other span of their utterances) with one of ``slots.modes`` — a span
    metric W = I + D over the encoder's vectors (``metric``, lr ``slots.learning_rate``) or the encoder's layers
    above the embeddings and ``slots.frozen_layers`` (``encoder``, lr ``slots.encoder_learning_rate``) — for
    one of ``slots.support_steps`` steps, both chosen with the decoding threshold by ``slots.folds``-fold
    cross-validation on the training examples. ``slots.modes`` is an order of preference: the encoder first,
    the metric only where it leads the encoder's best setting in ``slots.fallback_confidence`` of paired
    bootstrap resamples of the held-out examples, and 0 steps (retrieval alone, where the examples are too few
    to learn from) only where it leads the learner so chosen as clearly: a difference of a span or two is no
    evidence.
    The same cross-validation chooses whether the spans the examples leave unlabelled are indexed as "no slot"
    (``slots.none_margins``: a span nearer one of them than every labelled span, by the margin, is rejected),
    a deviation from the Retriever's §5.2, which rejects by the threshold alone. Where examples name the slot
    the bot had just asked for (``requested_slot``), it also chooses how much more a requested slot's values
    score (``slots.requested_bonuses``; ``parse(texts, requested_slots=...)``), as Span-ConveRT's requested-slot
    feature does on Restaurants-8k (Coope et al., 2020): ``13`` after "for how many people?" is people.
  * ``slots.by_intent`` (default on): the parts answer jointly. A text's spans retrieve only the slot labels its
    predicted intent's examples hold (examples without an intent lend theirs to all), after ConProm's
    intent-slot co-occurrence (Hou et al., 2021); the cross-validation decodes each held-out example with its
    own intent's labels, so the threshold is chosen for the joint decoding. Off: the slot filler ignores intents.
    Opt-in, **expected slots** (``slots.expected_shares=(1.0,)``): the cross-validation also tries filling in a
    slot that every example of an intent holds (every AddToPlaylist example names a playlist) where decoding left
    it out, with the span nearest that slot's examples (``slot_filler.fill_expected``): the intent-slot relation
    of the few-shot joint literature (Han et al., 2024) as a prior. Off by default: a user who leaves a slot out
    ("I want to order a pizza") would get one made up, and the cross-validation on the examples cannot see it.
"""

import ml_collections

from fewshot_nlu.defaults import common, convfit_base, qaid_base

INTENT_METHODS = ("convfit", "qaid")


def intents_config(method: str, shots: str = "10") -> ml_collections.ConfigDict:
  """The intent method's config for a user's examples (``fit``'s defaults: ``methods.METHODS``)."""
  if method == "convfit":
    config = convfit_base.user_config(shots)
    config.eval.calibration_split = ""  # a team's data has no development split
    return config
  if method == "qaid":
    return qaid_base.fit_config(None)
  raise ValueError(f"intent method {method!r} unknown; choose one of {INTENT_METHODS} (configs/nlu.py:<method>)")


def get_config(intent_method: str = "convfit") -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  base = common.base("nlu")
  config.method = "nlu"
  config.seed = 0
  config.compilation_cache_dir = base.compilation_cache_dir
  config.distributed = base.distributed

  config.data = ml_collections.ConfigDict()
  config.data.train = ""  # annotated examples (data.annotated): nlu.yml, .jsonl / .csv, Dialogflow .zip, seq.in folder
  config.data.eval = ""  # optional held-out examples in the same forms, scored at the end

  config.intent_method = intent_method
  config.intents = intents_config(intent_method)

  s = config.slots = ml_collections.ConfigDict()
  s.encoder = "general"  # "general": the installed general span encoder built on `model`; "": the untouched
  # model; or a folder
  s.model = "minilm-l6"  # the base model: the untouched one where no general span encoder built on it is installed,
  # or encoder=""; "mpnet-base" (with encoder_layers = 6) for accuracy (docstring)
  s.encoder_layers = 3  # the untouched model is cut after this many layers (its lower layers retrieve spans best;
  # MPNet-base: 6 of 12, the depth the cross-validation on SNIPS's 64 utterances preferred among 4 / 6 / 8 / 12)
  s.max_length = 64
  s.max_words = 7  # m: spans of up to this many words
  s.modes = ("encoder", "metric")  # candidate learners of the examples, in order of preference (each later one,
  # and retrieval alone after them, wins the cross-validation only on clear evidence: fallback_confidence):
  # "encoder" (its layers: slower, more to learn) | "metric" (a span metric W = I + D: a few products per step).
  # The encoder first: its cross-validation F1 led the metric's in 11 of 12 Restaurants-8k runs (by ~5 points)
  # and the two were level on SNIPS, where the metric had won on shares of 50-87% of resamples (coin flips).
  # On test the six runs the order moved went -2.5 to +5.1 points, +0.6 on average (joint_nlu_notes.md)
  s.support_steps = (0, 25, 50, 100)  # candidate step counts of learning the examples (0: retrieval alone)
  s.learning_rate = 1e-3  # mode "metric"
  s.encoder_learning_rate = 1e-4  # mode "encoder"
  s.frozen_layers = 1  # mode "encoder": embeddings + this many layers frozen (-1: none)
  s.cosine_scale = 20.0
  s.folds = 4  # cross-validation folds that choose the step count and the threshold
  s.fallback_confidence = 0.9  # a less preferred learner, or retrieval alone (0 steps), beats the pick only where it
  # leads in this share of paired bootstrap resamples of the held-out utterances (0: wherever its F1 is higher). On
  # Restaurants-8k the two seeds of nine that fell back on one or two spans of F1 (32 utterances: 64.41 vs 64.00;
  # 128: 74.42 vs 74.01) had it ahead in 50% / 56% of resamples, the seeds that learnt in 6-16%; and wherever
  # the cross-validation learnt, the test F1 was 8-11 points above retrieval alone (bench/results/joint_nlu_notes.md)
  s.none_margins = (0.0, 0.05, 0.1)  # candidate margins of the unlabelled spans (SlotRetriever; (): none indexed)
  s.requested_bonuses = (0.1, 0.2, 0.3, 0.4)  # candidate score bonuses of a requested slot's values, tried with
  # 0 where examples name the slot asked for before them (``requested_slot``; span_retrieval.requested_scores)
  s.requested_min_examples = 10  # fewer such examples cannot tell the bonuses apart (a new-user bot of 17 examples,
  # 7 naming a slot: the cross-validation's F1 moved by one span between bonuses, and chose 0, so "13" after
  # "how many people?" stayed a time); then the prior below is the bonus
  s.requested_bonus_prior = 0.2  # what the cross-validation chose on Restaurants-8k's 64 training utterances
  # (17 naming a slot; untouched MiniLM, seed 0), not on any test set
  s.thresholds = (0.0, 0.2, 0.3) + tuple(round(0.40 + 0.025 * i, 3) for i in range(23))  # 0 ... 0.95
  s.beam_size = 10
  s.merge_threshold = 0.99
  s.threshold_step = 0.05
  s.by_intent = True  # spans retrieve only the slot labels of the predicted intent's examples (docstring)
  s.expected_shares = ()  # opt-in, e.g. (1.0,): candidate shares of an intent's examples holding a slot for it to be
  # expected of the intent's texts (filled in where decoding left it out; models.slot_filler.fill_expected), tried
  # with None (off) by the cross-validation (a tie keeps the share). Off by default: examples that all name a slot
  # do not make users name it ("I want to order a pizza" took topping = "pizza"), and the cross-validation, drawn
  # from those examples, cannot see that; for data whose every utterance of an intent carries the slot (SNIPS) it
  # lifts sentence accuracy (joint_nlu_notes.md)
  s.threshold_retries = 0  # Retriever §5.2 lowers the threshold until some span passes (10 times by 0.05); a
  # user's utterance may hold no slot at all ("hi"), so none is lowered here

  config.eval = ml_collections.ConfigDict()
  config.eval.batch_size = 32
  return config
