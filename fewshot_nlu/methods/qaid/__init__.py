"""QAID (Yehudai et al., 2023): intent detection as question answering over intent names. ``train`` (pre-training
and fine-tuning), ``model`` (retrieval of intent names), ``late_interaction`` (Eq. 1), ``losses`` (Eq. 2 / 3 and
the ColBERT baselines), ``bm25`` (hard negatives)."""
