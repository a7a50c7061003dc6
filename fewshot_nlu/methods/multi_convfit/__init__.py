"""Multi-ConvFiT (Vulić et al., 2022): multi-label contrastive specialisation (full or adapters) and a
multi-label MLP. ``train`` (the method), ``model`` (the exported model), ``labels`` (label sets, thresholds,
metrics)."""
