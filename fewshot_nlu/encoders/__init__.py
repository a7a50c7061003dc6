"""Encoders: the transformer, pooling, pretrained loading, packing, frozen prefixes, quantisation."""

# What ``quantize=`` accepts (None: float32, as trained; ``encoders.quantize``). Here, so that the command lines
# list the choices without importing JAX.
QUANTIZATIONS = ("int8",)
# What ``runtime=`` accepts (None: XLA; ``encoders.onnx_inference``).
RUNTIMES = ("xla", "onnxruntime")
