"""DSE (Zhou et al., 2022): dialogue sentence embeddings from consecutive utterances. ``train`` (the method),
``losses`` (the hard-negative weighted contrastive loss, Eq. 1-3), ``head`` (the contrastive MLP head)."""
