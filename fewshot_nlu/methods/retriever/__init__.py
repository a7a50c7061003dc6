"""Retriever (Yu et al., 2021): retrieval-based few-shot slot filling (``slots``) and intent detection
(``intents``). ``training`` (batch-softmax training shared by both), ``losses`` (Eq. 3-5), ``spans`` (span vectors
and the support-set index), ``decoding`` (§5.2), ``model`` (the exported slot filler)."""
